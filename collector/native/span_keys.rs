//! The keys of recently stored spans, for the writer to drop a re-sent span without a key index
//! in the store: an index over every span ever stored costs memory for as long as the span is
//! kept, while an exporter re-sends a request only within its retry budget (minutes).
//!
//! A key is a 64-bit hash of `(trace_id, span_id)` under a seed of this process's own, kept as
//! a 32-bit fingerprint in an open-addressing table whose slot the other 32 bits choose: 4
//! bytes a slot, allocated once per generation, at most 80 % full. Keys are kept in two
//! generations; a new one starts when the writer says (the window's time) or when the current
//! one holds its capacity, and the one before it is let go. A key found here is only a
//! candidate: the writer confirms it in the store (a commit may have failed after its keys
//! were noted, and two keys may share a fingerprint, about once in 10^8 lookups at a full
//! table), so nothing is ever dropped on this set's word alone.

use std::hash::{BuildHasher, Hasher, RandomState};

use arrow_array::{Array, StringArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrow_py::import_struct;

/// One generation: fingerprints (0: an empty slot) in linear probing.
struct Generation {
    slots: Vec<u32>,
    count: usize,
}

impl Generation {
    /// Room for `capacity` keys with the table at most 80 % full.
    fn new(capacity: usize) -> Self {
        let n = (capacity + capacity / 4).max(16);
        Generation {
            slots: vec![0; n],
            count: 0,
        }
    }

    /// The first slot to look in, and the fingerprint (never 0).
    fn place(&self, h: u64) -> (usize, u32) {
        let home = ((h & 0xffff_ffff) * self.slots.len() as u64) >> 32;
        ((home as usize), ((h >> 32) as u32).max(1))
    }

    fn contains(&self, h: u64) -> bool {
        let (mut i, fp) = self.place(h);
        loop {
            match self.slots[i] {
                0 => return false,
                s if s == fp => return true,
                _ => i = if i + 1 == self.slots.len() { 0 } else { i + 1 },
            }
        }
    }

    /// Notes `h`; whether it was there. The caller keeps `count` under the capacity, so an
    /// empty slot is always found.
    fn insert(&mut self, h: u64) -> bool {
        let (mut i, fp) = self.place(h);
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = fp;
                    self.count += 1;
                    return false;
                }
                s if s == fp => return true,
                _ => i = if i + 1 == self.slots.len() { 0 } else { i + 1 },
            }
        }
    }

    fn clear(&mut self) {
        self.slots.fill(0);
        self.count = 0;
    }
}

/// Two generations of span key fingerprints.
pub struct KeyWindow {
    seed: RandomState,
    capacity: usize,
    current: Generation,
    older: Generation,
    /// Generations started since this window was made (by time or by a full one).
    pub rotations: u64,
}

impl KeyWindow {
    /// Room for `capacity` keys a generation (about 5 bytes a key, allocated at once).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        KeyWindow {
            seed: RandomState::new(),
            capacity,
            current: Generation::new(capacity),
            older: Generation::new(capacity),
            rotations: 0,
        }
    }

    fn hash(&self, trace_id: &str, span_id: &str) -> u64 {
        let mut h = self.seed.build_hasher();
        h.write(trace_id.as_bytes());
        h.write_u8(0xff); // never in UTF-8: ("ab", "c") and ("a", "bc") differ
        h.write(span_id.as_bytes());
        h.finish()
    }

    /// The positions of the keys noted before (in either generation, or earlier in `keys`),
    /// maybe; every key is noted in the current generation, a new one started when it is full.
    pub fn seen<'a>(&mut self, keys: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<u32> {
        let mut found = Vec::new();
        for (i, (trace_id, span_id)) in keys.enumerate() {
            let h = self.hash(trace_id, span_id);
            if self.older.contains(h) {
                found.push(i as u32);
                continue; // noted already, if only in the older generation
            }
            if self.current.count >= self.capacity {
                self.rotate();
            }
            if self.current.insert(h) {
                found.push(i as u32);
            }
        }
        found
    }

    /// Starts a new generation; the older one is let go (its table reused).
    pub fn rotate(&mut self) {
        std::mem::swap(&mut self.current, &mut self.older);
        self.current.clear();
        self.rotations += 1;
    }

    /// Keys in the current and the older generation.
    pub fn sizes(&self) -> (usize, usize) {
        (self.current.count, self.older.count)
    }
}

/// `KeyWindow` for the writer (`collector/store/span_keys.py`).
#[pyclass(module = "collector.normalize._native")]
pub struct SpanKeys {
    window: KeyWindow,
}

fn strings<'a>(batch: &'a arrow_array::StructArray, name: &str) -> PyResult<&'a StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| PyValueError::new_err(format!("span keys: no string column {name}")))
}

fn text(array: &StringArray, i: usize) -> &str {
    if array.is_null(i) {
        ""
    } else {
        array.value(i)
    }
}

#[pymethods]
impl SpanKeys {
    /// Room for `capacity` keys a generation.
    #[new]
    fn new(capacity: usize) -> Self {
        Self {
            window: KeyWindow::new(capacity),
        }
    }

    /// The rows of `batch` (a record batch with `trace_id` and `span_id`) whose key was noted
    /// before, in order; notes them all. A null id reads as "".
    fn seen(&mut self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let batch = import_struct(batch, "span keys")?;
        let (traces, spans) = (strings(&batch, "trace_id")?, strings(&batch, "span_id")?);
        let window = &mut self.window;
        Ok(py.detach(|| window.seen((0..batch.len()).map(|i| (text(traces, i), text(spans, i))))))
    }

    /// Starts a new generation; the older one is let go.
    fn rotate(&mut self) {
        self.window.rotate();
    }

    /// (keys in the current generation, in the older one).
    fn sizes(&self) -> (usize, usize) {
        self.window.sizes()
    }

    /// Generations started so far, by `rotate` or by a full one.
    #[getter]
    fn rotations(&self) -> u64 {
        self.window.rotations
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_seen_again_in_its_generation_and_the_next_only() {
        let mut w = KeyWindow::new(100);
        assert!(w.seen([("t1", "s1"), ("t1", "s2")].into_iter()).is_empty());
        assert_eq!(w.seen([("t1", "s2"), ("t2", "s1")].into_iter()), vec![0]);
        w.rotate();
        assert_eq!(w.seen([("t2", "s1")].into_iter()), vec![0]);
        assert_eq!(w.sizes(), (0, 3));
        w.rotate();
        w.rotate();
        assert!(w.seen([("t1", "s1"), ("t2", "s1")].into_iter()).is_empty());
        assert_eq!(w.rotations, 3);
    }

    #[test]
    fn a_key_repeated_in_one_call_is_seen_at_its_second_place() {
        let mut w = KeyWindow::new(100);
        let keys = [("t", "a"), ("t", "b"), ("t", "a"), ("t", "a")];
        assert_eq!(w.seen(keys.into_iter()), vec![2, 3]);
    }

    #[test]
    fn the_ids_are_not_read_as_one_string() {
        let mut w = KeyWindow::new(100);
        w.seen([("ab", "c")].into_iter());
        assert!(w.seen([("a", "bc"), ("abc", "")].into_iter()).is_empty());
    }

    #[test]
    fn a_full_generation_starts_the_next_and_the_last_keys_stay_known() {
        let ids: Vec<String> = (0..1000).map(|i| format!("{i:016x}")).collect();
        let mut w = KeyWindow::new(300);
        assert!(w.seen(ids.iter().map(|s| ("t", s.as_str()))).is_empty());
        assert_eq!(w.rotations, 3); // 300 + 300 + 300 + 100
        assert_eq!(w.sizes(), (100, 300));
        // the last 400 are known, the first 600 not (but for a fingerprint shared by chance)
        let last = w.seen(ids[600..].iter().map(|s| ("t", s.as_str())));
        assert_eq!(last.len(), 400);
        let first = w.seen(ids[..200].iter().map(|s| ("t", s.as_str())));
        assert!(first.len() <= 1, "{}", first.len());
    }

    #[test]
    fn a_full_table_finds_every_key_it_holds_and_few_it_does_not() {
        let mut g = Generation::new(100_000);
        let seed = RandomState::new();
        let hash = |i: u64| seed.hash_one(i);
        assert!((0..100_000).all(|i| !g.insert(hash(i))));
        assert!((0..100_000).all(|i| g.contains(hash(i))));
        let strangers = (100_000..1_100_000)
            .filter(|&i| g.contains(hash(i)))
            .count();
        assert!(strangers < 5, "{strangers} of a million unknown keys found");
    }
}

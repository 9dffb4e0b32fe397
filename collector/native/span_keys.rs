//! The keys of recently stored spans, for the writer to drop a re-sent span without a key index
//! in the store: an index over every span ever stored costs memory for as long as the span is
//! kept, while an exporter re-sends a request only within its retry budget (minutes).
//!
//! A key is a 64-bit hash of `(trace_id, span_id)` under a seed of this process's own, kept in
//! an open-addressing table that grows with the keys it holds, up to 10 bytes a key at the
//! generation's capacity (8 bytes a slot, at most 80 % full). Keys are kept in two
//! generations; a new one starts when the writer says (the window's time) or when the current
//! one holds its capacity, and the one before it is let go. A key found here is only a
//! candidate: the writer confirms it in the store (a commit may have failed after its keys
//! were noted, and two keys may share a hash), so nothing is ever dropped on this set's word
//! alone.

use std::hash::{BuildHasher, Hasher, RandomState};

use arrow_array::{Array, StringArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrow_py::import_struct;

/// Slots a generation starts with: a writer that stores little holds little.
const FIRST_SLOTS: usize = 1024;

/// One generation: key hashes (0: an empty slot) in linear probing.
struct Generation {
    slots: Vec<u64>,
    count: usize,
    /// Most slots: room for the generation's capacity at 80 % full.
    most: usize,
}

impl Generation {
    fn new(capacity: usize) -> Self {
        let most = (capacity + capacity / 4).max(FIRST_SLOTS);
        Generation {
            slots: vec![0; FIRST_SLOTS],
            count: 0,
            most,
        }
    }

    /// The first slot to look in for `h` (never 0), in a table of `n` slots.
    fn home(h: u64, n: usize) -> usize {
        ((u128::from(h) * n as u128) >> 64) as usize
    }

    /// The slot holding `h`, or the empty one where it would go.
    fn slot(&self, h: u64) -> usize {
        let n = self.slots.len();
        let mut i = Self::home(h, n);
        while self.slots[i] != 0 && self.slots[i] != h {
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        i
    }

    fn contains(&self, h: u64) -> bool {
        self.slots[self.slot(h.max(1))] != 0
    }

    /// Notes `h`; whether it was there. The caller keeps `count` under the capacity, so the
    /// table is at most 80 % full.
    fn insert(&mut self, h: u64) -> bool {
        let h = h.max(1);
        if (self.count + 1) * 5 > self.slots.len() * 4 && self.slots.len() < self.most {
            self.grow();
        }
        let i = self.slot(h);
        if self.slots[i] == h {
            return true;
        }
        self.slots[i] = h;
        self.count += 1;
        false
    }

    /// Twice the slots (at most `most`), every key placed again.
    fn grow(&mut self) {
        let n = (self.slots.len() * 2).min(self.most);
        let old = std::mem::replace(&mut self.slots, vec![0; n]);
        for h in old.into_iter().filter(|&h| h != 0) {
            let i = self.slot(h);
            self.slots[i] = h;
        }
    }

    /// Empty, at its first size again (the memory of a busy generation is given back).
    fn clear(&mut self) {
        self.slots = vec![0; FIRST_SLOTS];
        self.count = 0;
    }
}

/// Two generations of span key hashes.
pub struct KeyWindow {
    seed: RandomState,
    capacity: usize,
    current: Generation,
    older: Generation,
    /// Generations started since this window was made (by time or by a full one).
    pub rotations: u64,
}

impl KeyWindow {
    /// Room for `capacity` keys a generation (at most 10 bytes a key).
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
    /// maybe; every key not held yet is noted in the current generation (a new one started
    /// when it is full). A key found in the older one is not noted again: the window counts
    /// from its first copy.
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
        // the last 400 are known, the first 600 not
        let last = w.seen(ids[600..].iter().map(|s| ("t", s.as_str())));
        assert_eq!(last.len(), 400);
        assert!(w
            .seen(ids[..200].iter().map(|s| ("t", s.as_str())))
            .is_empty());
    }

    #[test]
    fn a_table_grown_to_its_capacity_finds_every_key_it_holds_and_none_else() {
        let mut g = Generation::new(100_000);
        let seed = RandomState::new();
        let hash = |i: u64| seed.hash_one(i);
        assert!((0..100_000).all(|i| !g.insert(hash(i))));
        assert_eq!(g.slots.len(), 125_000); // grown from 1,024 to 80 % full at the capacity
        assert!((0..100_000).all(|i| g.contains(hash(i))));
        assert!((100_000..1_100_000).all(|i| !g.contains(hash(i))));
        assert!(g.insert(hash(7)) && g.count == 100_000);
        g.clear();
        assert!(g.slots.len() == FIRST_SLOTS && !g.contains(hash(7)));
    }

    #[test]
    fn a_hash_of_zero_is_held_like_any_other() {
        let mut g = Generation::new(10);
        assert!(!g.contains(0) && !g.insert(0) && g.contains(0) && g.insert(0));
    }
}

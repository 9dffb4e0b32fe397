//! The keys of recently stored spans, for the writer to drop a re-sent span without a key index
//! in the store: an index over every span ever stored costs memory for as long as the span is
//! kept, while an exporter re-sends a request only within its retry budget (minutes).
//!
//! A key is a 64-bit hash of `(trace_id, span_id)` under a seed of this process's own. Keys are
//! kept in two generations: the writer starts a new one when the current is old or full, and
//! the one before it is let go. A key found here is only a candidate: the writer confirms it in
//! the store (a commit may have failed after its keys were noted, and two keys may share a
//! hash), so nothing is ever dropped on this set's word alone.

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use arrow_array::{Array, StringArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrow_py::import_struct;

/// The set's own hasher passes a key's hash through: it is already a seeded SipHash.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Hashes = HashSet<u64, BuildHasherDefault<Prehashed>>;

/// Two generations of span key hashes.
#[derive(Default)]
pub struct KeyWindow {
    seed: RandomState,
    current: Hashes,
    older: Hashes,
}

impl KeyWindow {
    fn hash(&self, trace_id: &str, span_id: &str) -> u64 {
        let mut h = self.seed.build_hasher();
        h.write(trace_id.as_bytes());
        h.write_u8(0xff); // never in UTF-8: ("ab", "c") and ("a", "bc") differ
        h.write(span_id.as_bytes());
        h.finish()
    }

    /// The positions of the keys noted before (in either generation, or earlier in `keys`);
    /// every key is noted in the current generation.
    pub fn seen<'a>(&mut self, keys: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<u32> {
        let mut found = Vec::new();
        for (i, (trace_id, span_id)) in keys.enumerate() {
            let h = self.hash(trace_id, span_id);
            if !self.current.insert(h) || self.older.contains(&h) {
                found.push(i as u32);
            }
        }
        found
    }

    /// Starts a new generation; the older one is let go.
    pub fn rotate(&mut self) {
        self.older = std::mem::take(&mut self.current);
    }

    /// Keys in the current and the older generation.
    pub fn sizes(&self) -> (usize, usize) {
        (self.current.len(), self.older.len())
    }
}

/// `KeyWindow` for the writer (`collector/store/span_keys.py`).
#[pyclass(module = "collector.normalize._native")]
#[derive(Default)]
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
    #[new]
    fn new() -> Self {
        Self::default()
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_seen_again_in_its_generation_and_the_next_only() {
        let mut w = KeyWindow::default();
        assert!(w.seen([("t1", "s1"), ("t1", "s2")].into_iter()).is_empty());
        assert_eq!(w.seen([("t1", "s2"), ("t2", "s1")].into_iter()), vec![0]);
        w.rotate();
        assert_eq!(w.seen([("t2", "s1")].into_iter()), vec![0]);
        assert_eq!(w.sizes(), (1, 3));
        w.rotate();
        w.rotate();
        assert!(w.seen([("t1", "s1"), ("t2", "s1")].into_iter()).is_empty());
    }

    #[test]
    fn a_key_repeated_in_one_call_is_seen_at_its_second_place() {
        let mut w = KeyWindow::default();
        let keys = [("t", "a"), ("t", "b"), ("t", "a"), ("t", "a")];
        assert_eq!(w.seen(keys.into_iter()), vec![2, 3]);
    }

    #[test]
    fn the_ids_are_not_read_as_one_string() {
        let mut w = KeyWindow::default();
        w.seen([("ab", "c")].into_iter());
        assert!(w.seen([("a", "bc"), ("abc", "")].into_iter()).is_empty());
    }
}

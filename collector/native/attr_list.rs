//! A decoded span's attributes: keys in first-seen order, a later duplicate replacing the value
//! in place, as a Python dict does.
//!
//! The decoder reads each attribute list once in order (the normalizer's probe, the JSON
//! column), so it needs no hash table: `serde_json::Map` (an `IndexMap` under SipHash) cost a
//! fifth of the decoder's samples in allocations and hashing. A duplicate key is rare (the
//! OTLP spec forbids it) but must be found: a 64-bit filter of the keys' lengths and last bytes
//! says when a key is surely new, and only a possible repeat is compared with the keys before.

use serde_json::{Map, Value};

/// Attributes in first-seen order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AttrList {
    items: Vec<(String, Value)>,
    seen: u64,
}

/// A bit for `key` in the filter: its length and last byte pick one of 64.
fn bit(key: &str) -> u64 {
    let last = key.as_bytes().last().copied().unwrap_or(0);
    let mix = (key.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(last);
    1 << (mix.wrapping_mul(0xFF51_AFD7_ED55_8CCD) >> 58)
}

impl AttrList {
    pub fn new() -> Self {
        AttrList::default()
    }

    /// Adds `key`, or replaces its value where it first came.
    pub fn insert(&mut self, key: String, value: Value) {
        let b = bit(&key);
        if self.seen & b != 0 {
            if let Some(slot) = self.items.iter_mut().find(|(k, _)| *k == key) {
                slot.1 = value;
                return;
            }
        }
        self.seen |= b;
        self.items.push((key, value));
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        if self.seen & bit(key) == 0 {
            return None;
        }
        self.items.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.into_iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Empties the list, keeping its capacity for the next span.
    pub fn clear(&mut self) {
        self.items.clear();
        self.seen = 0;
    }

    /// As a JSON object (an attribute whose value is a key-value list).
    pub fn into_map(self) -> Map<String, Value> {
        self.items.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a AttrList {
    type Item = (&'a String, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Value)>,
        fn(&'a (String, Value)) -> (&'a String, &'a Value),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
impl From<Map<String, Value>> for AttrList {
    fn from(map: Map<String, Value>) -> Self {
        let mut out = AttrList::new();
        for (k, v) in map {
            out.insert(k, v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(list: &AttrList) -> Vec<&str> {
        list.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn a_repeated_key_keeps_its_first_place_and_takes_the_last_value() {
        let mut list = AttrList::new();
        for (k, v) in [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)] {
            list.insert(k.to_owned(), json!(v));
        }
        assert_eq!(keys(&list), ["a", "b", "c"]);
        assert_eq!(list.get("a"), Some(&json!(3)));
        assert_eq!(list.get("b"), Some(&json!(5)));
        assert_eq!(list.get("d"), None);
        assert_eq!(
            Value::Object(list.into_map()),
            json!({"a": 3, "b": 5, "c": 4})
        );
    }

    #[test]
    fn agrees_with_a_map_on_many_keys_sharing_lengths_and_last_bytes() {
        // 2,000 inserts over 300 keys, most of them colliding in the filter
        let mut list = AttrList::new();
        let mut map = Map::new();
        let mut state = 12345u64;
        for i in 0..2000u64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = format!("gen_ai.k{:03}x", (state >> 33) % 300);
            list.insert(key.clone(), json!(i));
            map.insert(key, json!(i));
        }
        assert_eq!(list.len(), map.len());
        assert!(list.iter().zip(map.iter()).all(|(a, b)| a == b));
        assert!(map.iter().all(|(k, v)| list.get(k) == Some(v)));
        list.clear();
        assert!(list.is_empty() && list.get("gen_ai.k001x").is_none());
    }
}

//! What decoding one request yields: the accepted rows as Arrow, and the counts reported back.

use arrow_array::StructArray;
use serde_json::Value;

use crate::semconv::{self, Attrs, EventView, Normalized};

/// Counts by name in first-seen order, as a Python `Counter` iterates.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts(pub Vec<(String, usize)>);

impl Counts {
    pub fn add(&mut self, name: &str) {
        // A request rarely has more than a few distinct reasons or services: a scan beats a map.
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some((_, count)) => *count += 1,
            None => self.0.push((name.to_owned(), 1)),
        }
    }

    pub fn get(&self, name: &str) -> usize {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, count)| *count)
    }
}

/// One request's accepted rows (None when there are none) and what was rejected, why, and from
/// whom.
#[derive(Debug, Default)]
pub struct Decoded {
    pub batch: Option<StructArray>,
    pub rows: usize,
    pub rejected: Counts,
    pub truncated_rows: usize,
    /// Rejected items by their resource's service.name; "" where the resource names none.
    pub rejected_by_service: Counts,
}

/// The semantic conventions the decoder applies; a parameter so the decoder's own rules can be
/// tested apart from the normalizer's.
pub trait Semantics {
    fn text(&self, value: &Value) -> Option<String>;
    fn normalized(
        &self,
        attrs: &Attrs,
        name: &str,
        events: &[EventView<'_>],
        status_code: i32,
    ) -> Normalized;
}

/// The conventions of `semconv`.
pub struct Semconv;

impl Semantics for Semconv {
    fn text(&self, value: &Value) -> Option<String> {
        semconv::text(value)
    }

    fn normalized(
        &self,
        attrs: &Attrs,
        name: &str,
        events: &[EventView<'_>],
        status_code: i32,
    ) -> Normalized {
        semconv::normalized(attrs, name, events, status_code)
    }
}

/// A resource attribute as the text column it fills (service.name, service.version). A
/// non-finite double reads as null here as everywhere: it is stored as null (JSON has no
/// spelling for it), and the columns say what the stored attributes say.
pub fn resource_text<S: Semantics>(sem: &S, attrs: &Attrs, key: &str) -> Option<String> {
    sem.text(attrs.get(key).unwrap_or(&Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_keep_first_seen_order() {
        let mut counts = Counts::default();
        for name in ["b", "a", "b", "b"] {
            counts.add(name);
        }
        assert_eq!(counts.0, [("b".to_owned(), 3), ("a".to_owned(), 1)]);
        assert_eq!(counts.get("a"), 1);
        assert_eq!(counts.get("c"), 0);
    }
}

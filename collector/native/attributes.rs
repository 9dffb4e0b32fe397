//! OTLP `AnyValue` / `KeyValue` lists to `serde_json::Value`, the shape kept in the JSON columns.
//!
//! The decoded request is consumed: strings and keys move into the values instead of being
//! copied, and an over-long string is cut in place.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use serde_json::{Number, Value};

use crate::semconv::Attrs;

/// Converts attribute lists, truncating over-long strings and remembering which keys were cut.
///
/// One reader serves one request; `truncated` collects the keys cut in the row being read so the
/// caller can flag that row (the value is kept, shortened, never dropped).
pub struct Reader {
    limit: usize,
    pub truncated: Vec<String>,
}

impl Reader {
    /// `limit` is the longest string kept whole, in characters.
    pub fn new(limit: usize) -> Self {
        Reader {
            limit,
            truncated: Vec::new(),
        }
    }

    /// A fresh map of `kvs`; later duplicate keys replace the value in place, as a dict does.
    pub fn attributes(&mut self, kvs: Vec<KeyValue>) -> Attrs {
        let mut out = Attrs::new();
        self.read_into(&mut out, kvs);
        out
    }

    /// Adds `kvs` to `out`, which the caller may reuse (cleared) so its table keeps its capacity.
    pub fn read_into(&mut self, out: &mut Attrs, kvs: Vec<KeyValue>) {
        for KeyValue { key, value } in kvs {
            let value = self.value(value, &key);
            out.insert(key, value);
        }
    }

    /// One AnyValue (an attribute's, a log body, an array element); strings cut in it are
    /// recorded under `key`, the innermost attribute key that holds them.
    pub fn value(&mut self, value: Option<AnyValue>, key: &str) -> Value {
        match value.and_then(|v| v.value) {
            None => Value::Null,
            Some(Any::StringValue(mut s)) => {
                if cut(&mut s, self.limit) {
                    self.truncated.push(key.to_owned());
                }
                Value::String(s)
            }
            Some(Any::BoolValue(b)) => Value::Bool(b),
            Some(Any::IntValue(i)) => Value::Number(i.into()),
            // orjson writes NaN and ±Infinity as null; JSON has no other spelling for them.
            Some(Any::DoubleValue(f)) => Number::from_f64(f).map_or(Value::Null, Value::Number),
            Some(Any::ArrayValue(array)) => Value::Array(
                array
                    .values
                    .into_iter()
                    .map(|item| self.value(Some(item), key))
                    .collect(),
            ),
            Some(Any::KvlistValue(list)) => Value::Object(self.attributes(list.values).into_map()),
            Some(Any::BytesValue(bytes)) => Value::String(STANDARD.encode(bytes)),
        }
    }
}

/// Cuts `s` to its first `limit` characters (not bytes, as Python slices a `str`); whether it
/// was longer.
pub fn cut(s: &mut String, limit: usize) -> bool {
    // A string has at least as many bytes as characters: most need no count at all.
    if s.len() <= limit {
        return false;
    }
    match s.char_indices().nth(limit) {
        Some((end, _)) => {
            s.truncate(end);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};
    use serde_json::json;

    fn any(v: Any) -> Option<AnyValue> {
        Some(AnyValue { value: Some(v) })
    }

    fn kv(key: &str, v: Any) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: any(v),
        }
    }

    fn s(text: &str) -> Any {
        Any::StringValue(text.into())
    }

    #[test]
    fn scalars_become_json_scalars() {
        let mut r = Reader::new(100);
        let attrs = r.attributes(vec![
            kv("s", s("x")),
            kv("b", Any::BoolValue(true)),
            kv("i", Any::IntValue(-7)),
            kv("d", Any::DoubleValue(1.5)),
            kv("big", Any::IntValue(i64::MAX)),
        ]);
        assert_eq!(
            Value::Object(attrs.into_map()),
            json!({"s": "x", "b": true, "i": -7, "d": 1.5, "big": i64::MAX})
        );
        assert!(r.truncated.is_empty());
    }

    #[test]
    fn non_finite_doubles_become_null() {
        let mut r = Reader::new(100);
        let attrs = r.attributes(vec![
            kv("nan", Any::DoubleValue(f64::NAN)),
            kv("inf", Any::DoubleValue(f64::INFINITY)),
            kv("-inf", Any::DoubleValue(f64::NEG_INFINITY)),
        ]);
        assert_eq!(
            Value::Object(attrs.into_map()),
            json!({"nan": null, "inf": null, "-inf": null})
        );
    }

    #[test]
    fn unset_value_and_missing_anyvalue_are_null() {
        let mut r = Reader::new(100);
        let attrs = r.attributes(vec![
            KeyValue {
                key: "none".into(),
                value: None,
            },
            KeyValue {
                key: "empty".into(),
                value: Some(AnyValue { value: None }),
            },
        ]);
        assert_eq!(
            Value::Object(attrs.into_map()),
            json!({"none": null, "empty": null})
        );
    }

    #[test]
    fn bytes_become_standard_base64() {
        let mut r = Reader::new(2);
        let v = r.value(any(Any::BytesValue(vec![0xfb, 0xff, 0x00, 0x41])), "k");
        // Encoded bytes are never truncated, however long.
        assert_eq!(v, json!("+/8AQQ=="));
        assert!(r.truncated.is_empty());
    }

    #[test]
    fn duplicate_key_replaces_value_in_first_position() {
        let mut r = Reader::new(100);
        let attrs = r.attributes(vec![
            kv("a", Any::IntValue(1)),
            kv("b", Any::IntValue(2)),
            kv("a", Any::IntValue(3)),
        ]);
        assert_eq!(
            serde_json::to_string(&attrs.into_map()).unwrap(),
            r#"{"a":3,"b":2}"#
        );
    }

    #[test]
    fn long_string_is_cut_to_limit_characters_and_key_recorded() {
        let mut r = Reader::new(3);
        let attrs = r.attributes(vec![
            kv("short", s("abc")),
            kv("long", s("abcd")),
            kv("wide", s("ééé")),
            kv("wider", s("日本語です")),
        ]);
        assert_eq!(
            Value::Object(attrs.into_map()),
            json!({"short": "abc", "long": "abc", "wide": "ééé", "wider": "日本語"})
        );
        assert_eq!(r.truncated, ["long", "wider"]);
    }

    #[test]
    fn cut_counts_characters_not_bytes() {
        let mut text = String::from("aé😀b");
        assert!(!cut(&mut text, 4));
        assert!(cut(&mut text, 3));
        assert_eq!(text, "aé😀");
        let mut zero = String::from("x");
        assert!(cut(&mut zero, 0));
        assert_eq!(zero, "");
        let mut empty = String::new();
        assert!(!cut(&mut empty, 0));
    }

    #[test]
    fn strings_cut_in_an_array_are_recorded_under_its_key_once_each() {
        let mut r = Reader::new(1);
        let nested = Any::ArrayValue(ArrayValue {
            values: vec![AnyValue {
                value: Some(s("yy")),
            }],
        });
        let array = Any::ArrayValue(ArrayValue {
            values: vec![
                AnyValue {
                    value: Some(s("xx")),
                },
                AnyValue {
                    value: Some(s("z")),
                },
                AnyValue {
                    value: Some(nested),
                },
                AnyValue { value: None },
            ],
        });
        let attrs = r.attributes(vec![kv("list", array)]);
        assert_eq!(
            Value::Object(attrs.into_map()),
            json!({"list": ["x", "z", ["y"], null]})
        );
        assert_eq!(r.truncated, ["list", "list"]);
    }

    #[test]
    fn strings_cut_in_a_kvlist_are_recorded_under_the_inner_key() {
        let mut r = Reader::new(1);
        let inner = Any::KvlistValue(KeyValueList {
            values: vec![kv("in", s("long")), kv("ok", s("k"))],
        });
        let attrs = r.attributes(vec![kv("outer", inner)]);
        assert_eq!(
            Value::Object(attrs.into_map()),
            json!({"outer": {"in": "l", "ok": "k"}})
        );
        assert_eq!(r.truncated, ["in"]);
    }

    #[test]
    fn kvlist_in_array_records_inner_keys() {
        let mut r = Reader::new(1);
        let kvlist = Any::KvlistValue(KeyValueList {
            values: vec![kv("deep", s("long"))],
        });
        let array = Any::ArrayValue(ArrayValue {
            values: vec![AnyValue {
                value: Some(kvlist),
            }],
        });
        let attrs = r.attributes(vec![kv("arr", array)]);
        assert_eq!(
            Value::Object(attrs.into_map()),
            json!({"arr": [{"deep": "l"}]})
        );
        assert_eq!(r.truncated, ["deep"]);
    }

    #[test]
    fn read_into_appends_to_a_reused_map() {
        let mut r = Reader::new(10);
        let mut out = Attrs::new();
        r.read_into(&mut out, vec![kv("a", Any::IntValue(1))]);
        out.clear();
        r.read_into(&mut out, vec![kv("b", Any::IntValue(2))]);
        assert_eq!(Value::Object(out.into_map()), json!({"b": 2}));
    }

    #[test]
    fn compact_json_matches_orjson_spelling() {
        let mut r = Reader::new(100);
        let attrs = r.attributes(vec![
            kv("q", s("a\"b\\c\n\u{1}\u{7f}é/")),
            kv("f", Any::DoubleValue(1.0)),
            kv("g", Any::DoubleValue(1e-7)),
        ]);
        assert_eq!(
            serde_json::to_string(&attrs.into_map()).unwrap(),
            "{\"q\":\"a\\\"b\\\\c\\n\\u0001\u{7f}é/\",\"f\":1.0,\"g\":1e-7}"
        );
    }
}

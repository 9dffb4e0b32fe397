//! Compact JSON of decoded values, byte for byte what `orjson.dumps` (the Python decoder's
//! writer) writes: serde_json's text but for floats (`1e+16`, `0.00001`, `1e-7`). Strings are
//! checked for characters to escape eight bytes at a time: attribute text is most of what the
//! decoder writes, and it rarely needs escaping.

use serde_json::Value;

use crate::python::{self, FloatStyle};
use crate::semconv::Attrs;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `value` as compact JSON, appended to `out`.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() => {
                let mut text = String::new();
                python::write_float(x, FloatStyle::Orjson, &mut text);
                out.extend_from_slice(text.as_bytes());
            }
            // integers: serde_json's itoa
            _ => serde_json::to_writer(&mut *out, n).expect("a Vec takes any write"),
        },
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => write_map(out, map),
    }
}

/// A map (an object's or a span's attributes) as a JSON object, in its order.
pub fn write_map<'a, M>(out: &mut Vec<u8>, map: &'a M)
where
    &'a M: IntoIterator<Item = (&'a String, &'a Value)>,
{
    out.push(b'{');
    for (i, (key, value)) in map.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        write_value(out, value);
    }
    out.push(b'}');
}

/// A map as JSON text (the columns shared by a resource's or scope's rows, built once).
pub fn map_text(map: &Attrs) -> String {
    let mut out = Vec::new();
    write_map(&mut out, map);
    String::from_utf8(out).expect("JSON of UTF-8 strings is UTF-8")
}

/// A JSON string: `"` and `\` escaped, control characters as `\b \t \n \f \r` or `\u00xx`;
/// everything else (DEL and non-ASCII included) as it is.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    while let Some(i) = find_escape(bytes, start) {
        out.extend_from_slice(&bytes[start..i]);
        let b = bytes[i];
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0a => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            0x0d => out.extend_from_slice(b"\\r"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]),
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The first byte at or after `from` that must be escaped.
fn find_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let n = bytes.len();
    let mut i = from;
    while i + 8 <= n {
        if let Some(at) = escape_in_word(word_at(bytes, i)) {
            return Some(i + at);
        }
        i += 8;
    }
    if i == n {
        return None;
    }
    if n >= 8 {
        // The last word, shifted past the bytes before `i` (escapes already written, maybe),
        // with spaces (nothing to escape) coming in at the top.
        let skip = 8 * (i - (n - 8)) as u32;
        let word = (word_at(bytes, n - 8) >> skip) | (u64::from_le_bytes([b' '; 8]) << (64 - skip));
        return escape_in_word(word).map(|at| i + at);
    }
    bytes[i..]
        .iter()
        .position(|&b| needs_escape(b))
        .map(|p| i + p)
}

fn word_at(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"))
}

/// The index of the first byte of `word` (little-endian) below 0x20, a quote or a backslash.
fn escape_in_word(word: u64) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The standard zero-byte test on word - 0x20.., word ^ '"'.. and word ^ '\\'..: a byte's
    // high bit is set in `hit` when it matches (only bytes below 0x80 can, hence `& !word`).
    // Borrows run upward only, so the lowest flagged byte is a true match.
    let below = word.wrapping_sub(ONES * 0x20);
    let quote = (word ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES);
    let slash = (word ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES);
    let hit = (below | quote | slash) & !word & HIGH;
    (hit != 0).then(|| (hit.trailing_zeros() / 8) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ours(value: &Value) -> String {
        let mut out = Vec::new();
        write_value(&mut out, value);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_single_character_escapes_as_serde_json_does() {
        for c in (0u32..0x300).chain([0x2028, 0x2029, 0xfeff, 0x1f600]) {
            let Some(c) = char::from_u32(c) else { continue };
            for s in [
                c.to_string(),
                format!("abcdefgh{c}"),
                format!("{c}abcdefghijklmnop"),
            ] {
                let v = Value::String(s);
                assert_eq!(ours(&v), serde_json::to_string(&v).unwrap(), "{c:?}");
            }
        }
    }

    #[test]
    fn escapes_found_in_every_position_of_a_word() {
        for len in 0..24 {
            for pos in 0..len {
                for special in ['"', '\\', '\n', '\u{1}', '\u{1f}'] {
                    let mut s: Vec<char> = "xé日yzwvutsrqponmlkjihgf".chars().take(len).collect();
                    s[pos] = special;
                    let v = Value::String(s.into_iter().collect());
                    assert_eq!(ours(&v), serde_json::to_string(&v).unwrap());
                }
            }
        }
    }

    #[test]
    fn random_strings_with_many_escapes_match_serde_json() {
        let alphabet: Vec<char> = "ab \"\\\n\t\u{0}\u{1f}\u{7f}é日😀/".chars().collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let s: String = (0..len)
                .map(|k| alphabet[((seed >> (k % 50)) as usize + k * 7) % alphabet.len()])
                .collect();
            let v = Value::String(s);
            assert_eq!(ours(&v), serde_json::to_string(&v).unwrap());
        }
    }

    #[test]
    fn bytes_near_the_escaped_ones_are_not_escaped() {
        // 0x20 (space), 0x21, 0x23, 0x5b, 0x5d, 0x7f and bytes with the high bit set.
        let v = Value::String(" !#[]\u{7f}\u{80}\u{a2}\u{dc}\u{ff}€😀 !#[]".into());
        assert_eq!(ours(&v), serde_json::to_string(&v).unwrap());
    }

    #[test]
    fn values_serialize_as_orjson_does() {
        let v = json!({
            "n": null, "t": true, "f": false, "i": -9223372036854775807i64, "u": 18446744073709551615u64,
            "d": [0.1, 1.0, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 123456789.125],
            "nested": {"a": [[], {}, [{"b": "c\"d"}]]}, "": "",
        });
        // orjson.dumps of the same value (serde_json writes 1e16 and 1.7976931348623157e308)
        let dumped = concat!(
            r#"{"n":null,"t":true,"f":false,"i":-9223372036854775807,"u":18446744073709551615,"#,
            r#""d":[0.1,1.0,-0.0,1e+16,1e-7,5e-324,1.7976931348623157e+308,123456789.125],"#,
            r#""nested":{"a":[[],{},[{"b":"c\"d"}]]},"":""}"#,
        );
        assert_eq!(ours(&v), dumped);
        let parsed: Value = serde_json::from_str(&ours(&v)).unwrap();
        assert_eq!(parsed, v);
    }

    #[test]
    fn orjson_float_format_switches_notation_at_its_own_bounds() {
        let cases = [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-5, "0.00001"),
            (2.5e-5, "0.000025"),
            (1e-6, "1e-6"),
            (1.5e-7, "1.5e-7"),
            (1.5e300, "1.5e+300"),
            (100.0, "100.0"),
            (-0.0, "-0.0"),
        ];
        for (x, dumped) in cases {
            assert_eq!(ours(&json!(x)), dumped, "{x:e}");
        }
        // halfway between two shortest candidates: the even digit, as in repr
        assert_eq!(
            ours(&json!(-616_542_274_417_507.0 - 0.25)),
            "-616542274417507.2"
        );
    }
}

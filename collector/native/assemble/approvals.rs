//! An approval tool's status from its result, as the default recogniser reads it
//! (evaluators/approvals.py over evaluators/results.py's parsed result).

use serde_json::{Map, Value};

use crate::semconv::{read_json, Read};

use super::messages::py_space;
use super::Fail;

const PARSE_LIMIT: usize = 1 << 20;
const LITERAL_LIMIT: usize = 64 << 10;
const MAX_DEPTH: usize = 4;

/// The tool's return value: envelopes removed, JSON (or Python literal) text decoded.
pub fn parse_result(text: &str) -> Result<Value, Fail> {
    parse(text, false)
}

/// `parse_result` with a Python literal's numbers kept as Python holds them (flow rules compare
/// them as text); a number JSON cannot hold (an int past 64 bits, an infinite float) is left
/// to Python.
pub fn parse_result_exact(text: &str) -> Result<Value, Fail> {
    parse(text, true)
}

fn parse(text: &str, exact: bool) -> Result<Value, Fail> {
    let mut value = Value::String(text.to_owned());
    for _ in 0..MAX_DEPTH {
        match unwrap_once(&value, exact)? {
            Some(inner) => value = inner,
            None => break,
        }
    }
    Ok(value)
}

/// One envelope (or one level of text) removed; None when there is none.
fn unwrap_once(value: &Value, exact: bool) -> Result<Option<Value>, Fail> {
    match value {
        Value::String(text) => decoded(text, exact),
        Value::Object(map) => Ok(unwrap_object(map)),
        Value::Array(items) if !items.is_empty() && items.iter().all(is_text_part) => {
            let texts: Vec<&str> = items
                .iter()
                .map(|p| p["text"].as_str().expect("checked text part"))
                .collect();
            Ok(Some(Value::String(texts.join("\n"))))
        }
        _ => Ok(None),
    }
}

fn unwrap_object(map: &Map<String, Value>) -> Option<Value> {
    if map.contains_key("output") && map.keys().all(|k| k == "output" || k == "kwargs") {
        return map.get("output").cloned();
    }
    let kind = map.get("type").and_then(Value::as_str);
    if matches!(kind, Some("tool" | "constructor")) {
        let holder = if map.get("lc").is_some_and(crate::semconv::truthy) {
            map.get("kwargs")
        } else {
            map.get("data")
        };
        if let Some(Value::Object(holder)) = holder {
            if let Some(content) = holder.get("content") {
                return Some(content.clone());
            }
        }
        if kind == Some("tool") && map.contains_key("content") && map.contains_key("tool_call_id") {
            return map.get("content").cloned();
        }
    }
    if let Some(structured) = map.get("structuredContent").filter(|v| !v.is_null()) {
        return Some(structured.clone());
    }
    if map.contains_key("content") && (map.contains_key("isError") || map.len() == 1) {
        return map.get("content").cloned();
    }
    None
}

fn is_text_part(part: &Value) -> bool {
    part.as_object().is_some_and(|p| {
        p.get("type").and_then(Value::as_str) == Some("text")
            && p.get("text").is_some_and(Value::is_string)
    })
}

/// JSON text decoded (or a Python literal such as `str()` of a dict); None for other text.
fn decoded(text: &str, exact: bool) -> Result<Option<Value>, Fail> {
    let stripped = text.trim_matches(py_space);
    let first = stripped.chars().next();
    if !matches!(first, Some('{' | '[' | '"')) || stripped.chars().count() > PARSE_LIMIT {
        return Ok(None);
    }
    match read_json(stripped) {
        Read::Value(v) => return Ok(Some(v)),
        Read::TooDeep => return Err(Fail::unsupported("a tool result nests too deep")),
        Read::Invalid => {}
    }
    if first != Some('"') && stripped.chars().count() <= LITERAL_LIMIT {
        return match Literal::new(stripped, exact).whole() {
            Ok(v) => Ok(Some(v)),
            Err(Lit::Invalid) => Ok(None),
            Err(Lit::Unknown) => Err(Fail::unsupported(
                "a tool result is a Python literal of a form this builder does not read",
            )),
        };
    }
    Ok(None)
}

/// Why a literal was not read: Python's `ast.literal_eval` refuses it too, or it may not
/// (a form this reader leaves to Python: tuples, sets, bytes, prefixed or triple-quoted or
/// concatenated strings, complex and non-decimal numbers, comments).
enum Lit {
    Invalid,
    Unknown,
}

/// A reader of the Python literals `str()` of a returned value spells: dicts with string keys,
/// lists, strings, decimal numbers, True, False and None.
struct Literal<'s> {
    s: &'s [u8],
    text: &'s str,
    i: usize,
    depth: usize,
    /// Numbers read as their values (else as 0: an approval never reads them).
    exact: bool,
}

impl<'s> Literal<'s> {
    fn new(text: &'s str, exact: bool) -> Self {
        Self {
            s: text.as_bytes(),
            text,
            i: 0,
            depth: 0,
            exact,
        }
    }

    fn whole(mut self) -> Result<Value, Lit> {
        let v = self.value()?;
        self.ws()?;
        if self.i < self.s.len() {
            return Err(self.stray());
        }
        Ok(v)
    }

    /// A character no literal has here: a form this reader does not know, or an error.
    fn stray(&self) -> Lit {
        match self.s[self.i] {
            b'(' | b'#' | b'\\' | b'.' | b'\'' | b'"' | b'j' | b'J' | b'_' => Lit::Unknown,
            b if b.is_ascii_alphanumeric() => Lit::Unknown,
            b if b >= 0x80 => self.non_ascii(),
            b'+' | b'-' | b'*' | b'/' | b'%' | b'@' | b'&' | b'|' | b'^' | b'~' | b'<' | b'>'
            | b'=' | b'!' | b'[' | b'{' => Lit::Invalid,
            _ => Lit::Unknown,
        }
    }

    /// A character past ASCII outside a string: Python reads it as part of a name (never a
    /// literal, but for `set()` spelled in other letters, which a call's parenthesis gives
    /// away) or refuses it (no other token has one).
    fn non_ascii(&self) -> Lit {
        if self.s.contains(&b'(') {
            Lit::Unknown
        } else {
            Lit::Invalid
        }
    }

    fn ws(&mut self) -> Result<(), Lit> {
        while let Some(&b) = self.s.get(self.i) {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => self.i += 1,
                b'#' | b'\\' => return Err(Lit::Unknown),
                _ => break,
            }
        }
        Ok(())
    }

    fn value(&mut self) -> Result<Value, Lit> {
        self.ws()?;
        let Some(&b) = self.s.get(self.i) else {
            return Err(Lit::Invalid);
        };
        match b {
            b'{' => self.dict(),
            b'[' => self.list(),
            b'\'' | b'"' => {
                let s = self.string()?;
                self.ws()?;
                if matches!(self.s.get(self.i), Some(b'\'' | b'"')) {
                    return Err(Lit::Unknown); // implicit concatenation
                }
                Ok(Value::String(s))
            }
            b'0'..=b'9' | b'-' | b'+' => self.number(),
            b'A'..=b'Z' | b'a'..=b'z' | b'_' => self.name(),
            _ if b >= 0x80 => Err(self.non_ascii()),
            _ => Err(if b == b'(' || b == b'.' {
                Lit::Unknown
            } else {
                Lit::Invalid
            }),
        }
    }

    fn enter(&mut self) -> Result<(), Lit> {
        self.depth += 1;
        if self.depth > 150 {
            return Err(Lit::Unknown);
        }
        self.i += 1;
        Ok(())
    }

    fn dict(&mut self) -> Result<Value, Lit> {
        self.enter()?;
        let mut map = Map::new();
        loop {
            self.ws()?;
            if self.s.get(self.i) == Some(&b'}') {
                self.i += 1;
                break;
            }
            let key = match self.value()? {
                Value::String(k) => k,
                _ => return Err(Lit::Unknown), // a key of another type
            };
            self.ws()?;
            match self.s.get(self.i) {
                Some(b':') => self.i += 1,
                Some(b',' | b'}') => return Err(Lit::Unknown), // a set
                _ => return Err(self.err_here()),
            }
            let v = self.value()?;
            map.insert(key, v);
            self.ws()?;
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return Err(self.err_here()),
            }
        }
        self.depth -= 1;
        Ok(Value::Object(map))
    }

    fn list(&mut self) -> Result<Value, Lit> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            self.ws()?;
            if self.s.get(self.i) == Some(&b']') {
                self.i += 1;
                break;
            }
            items.push(self.value()?);
            self.ws()?;
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    break;
                }
                _ => return Err(self.err_here()),
            }
        }
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    fn err_here(&self) -> Lit {
        if self.i >= self.s.len() {
            Lit::Invalid
        } else {
            self.stray()
        }
    }

    fn name(&mut self) -> Result<Value, Lit> {
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
        {
            self.i += 1;
        }
        let word = &self.text[start..self.i];
        match self.s.get(self.i) {
            Some(b'\'' | b'"' | b'(' | b'.') => return Err(Lit::Unknown),
            Some(b) if *b >= 0x80 => return Err(self.non_ascii()),
            _ => {}
        }
        match word {
            "True" => Ok(Value::Bool(true)),
            "False" => Ok(Value::Bool(false)),
            "None" => Ok(Value::Null),
            _ => Err(Lit::Invalid),
        }
    }

    /// A decimal number; its value never matters to an approval (no shape compares numbers),
    /// only that it is one.
    fn number(&mut self) -> Result<Value, Lit> {
        let signed = self.i;
        if matches!(self.s[self.i], b'-' | b'+') {
            self.i += 1;
        }
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let int = &self.text[start..self.i];
        if int.is_empty() || (int.len() > 1 && int.starts_with('0')) {
            return Err(Lit::Unknown);
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            let frac = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            if frac == self.i {
                return Err(Lit::Unknown);
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'-' | b'+')) {
                self.i += 1;
            }
            let exp = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            if exp == self.i {
                return Err(Lit::Unknown);
            }
        }
        if self
            .s
            .get(self.i)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.' || *b >= 0x80)
        {
            return Err(Lit::Unknown);
        }
        if !self.exact {
            return Ok(Value::from(0));
        }
        let text = self.text[signed..self.i].trim_start_matches('+');
        if self.text[start..self.i].bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(i) = text.parse::<i64>() {
                return Ok(Value::from(i));
            }
            return text
                .parse::<u64>()
                .map(Value::from)
                .map_err(|_| Lit::Unknown);
        }
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Value::from(x)),
            _ => Err(Lit::Unknown),
        }
    }

    fn string(&mut self) -> Result<String, Lit> {
        let quote = self.s[self.i];
        if self.s.get(self.i + 1) == Some(&quote) && self.s.get(self.i + 2) == Some(&quote) {
            return Err(Lit::Unknown); // triple-quoted
        }
        self.i += 1;
        let mut out = String::new();
        loop {
            let rest = &self.text[self.i..];
            let Some(c) = rest.chars().next() else {
                return Err(Lit::Invalid);
            };
            self.i += c.len_utf8();
            match c {
                '\n' | '\r' => return Err(Lit::Invalid),
                '\\' => out.push(self.escape()?),
                c if c as u32 == u32::from(quote) => return Ok(out),
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self) -> Result<char, Lit> {
        let Some(&b) = self.s.get(self.i) else {
            return Err(Lit::Invalid);
        };
        self.i += 1;
        let hex = |this: &mut Self, n: usize| -> Result<char, Lit> {
            let digits = this.text.get(this.i..this.i + n).ok_or(Lit::Unknown)?;
            if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
                return Err(Lit::Unknown);
            }
            this.i += n;
            let cp = u32::from_str_radix(digits, 16).map_err(|_| Lit::Unknown)?;
            char::from_u32(cp).ok_or(Lit::Unknown)
        };
        Ok(match b {
            b'\\' => '\\',
            b'\'' => '\'',
            b'"' => '"',
            b'n' => '\n',
            b't' => '\t',
            b'r' => '\r',
            b'a' => '\x07',
            b'b' => '\x08',
            b'f' => '\x0c',
            b'v' => '\x0b',
            b'x' => hex(self, 2)?,
            b'u' => hex(self, 4)?,
            b'U' => hex(self, 8)?,
            _ => return Err(Lit::Unknown),
        })
    }
}

/// A value at `$.key` (or `$` with no key), as `at_path` finds it.
fn at<'v>(result: &'v Value, key: Option<&str>) -> Option<&'v Value> {
    match key {
        None => Some(result),
        Some(k) => result.as_object()?.get(k),
    }
}

fn same_text(value: &Value, expected: &str) -> bool {
    value
        .as_str()
        .is_some_and(|v| v.trim_matches(py_space).to_lowercase() == expected)
}

/// A place in the result (a key, or the whole) and the words that mean approved, denied and
/// pending there.
type Shape = (
    Option<&'static str>,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

/// The default shapes in their order: `approved: true|false`, `status`, `decision`, the whole.
pub fn status_of(result: &Value) -> Option<&'static str> {
    if let Some(Value::Bool(b)) = at(result, Some("approved")) {
        return Some(if *b { "approved" } else { "denied" });
    }
    let shapes: [Shape; 3] = [
        (
            Some("status"),
            &["approved", "granted"],
            &["denied", "rejected"],
            &["pending"],
        ),
        (
            Some("decision"),
            &["approve", "approved"],
            &["reject", "rejected", "deny", "denied"],
            &["pending"],
        ),
        (None, &["approved"], &["denied", "rejected"], &["pending"]),
    ];
    for (key, approved, denied, pending) in shapes {
        let Some(value) = at(result, key) else {
            continue;
        };
        for (status, values) in [
            ("approved", approved),
            ("denied", denied),
            ("pending", pending),
        ] {
            if values.iter().any(|v| same_text(value, v)) {
                return Some(status);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(text: &str) -> Option<&'static str> {
        status_of(&parse_result(text).ok().unwrap())
    }

    #[test]
    fn python_literals_and_envelopes() {
        assert_eq!(status("{'approved': True}"), Some("approved"));
        assert_eq!(status("{\"status\": \" Denied \"}"), Some("denied"));
        assert_eq!(status("pending"), Some("pending"));
        assert_eq!(
            status("{\"output\": \"{\\\"decision\\\": \\\"deny\\\"}\"}"),
            Some("denied")
        );
        assert_eq!(status("[APPROVED] ok"), None);
        assert!(parse_result("{'a': (1, 2)}").is_err());
        assert_eq!(
            parse_result("{\u{a0}'a': 1}").ok(),
            Some(Value::String("{\u{a0}'a': 1}".into()))
        );
        assert!(parse_result("[ｓｅｔ()]").is_err());
    }
}

//! One stored span of a closing trace, borrowed from the round's Arrow columns, with its
//! attribute JSON decoded only when something needs it (collector/assembler/spans.py).

use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::semconv::{read_json, Read};

use super::messages::Call;
use super::Fail;

/// The columns of `spans` the builder reads, one row.
pub struct Row<'a> {
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub parent_span_id: Option<&'a str>,
    pub flags: Option<u32>,
    pub name: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub scope_name: Option<&'a str>,
    pub start: u64,
    pub end: u64,
    pub status_code: Option<&'a str>,
    pub step_kind: Option<&'a str>,
    pub tool_name: Option<&'a str>,
    pub tool_call_id: Option<&'a str>,
    pub tool_arguments: Option<&'a str>,
    pub tool_result: Option<&'a str>,
    pub model: Option<&'a str>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub agent_name: Option<&'a str>,
    pub conversation_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub error_type: Option<&'a str>,
    pub service_name: Option<&'a str>,
    pub service_version: Option<&'a str>,
    pub attributes: Option<&'a str>,
    pub events: Option<&'a str>,
    /// Microseconds since the epoch.
    pub received_at: i64,
    /// What was read of the attributes before, kept with a span that outlives one build (a
    /// run the guard keeps and weighs at each call); None: read afresh.
    pub memo: Option<&'a SpanMemo>,
}

/// What the builder read of a span: its attributes decoded whole or indexed by top-level key,
/// and what it found in them. Each is a function of the span's own row alone, so a span kept
/// between builds (a run the guard keeps) is read once.
#[derive(Clone, Default)]
pub struct SpanMemo {
    attrs: OnceLock<Map<String, Value>>,
    /// The attribute object's top-level keys and where their values' text is (None: text this
    /// index does not read, decoded whole instead).
    index: OnceLock<Option<Entries>>,
    /// The case the span names (trajectory.rs `find_case_id`).
    pub(super) case: OnceLock<Option<String>>,
    /// The tool call a framework wrapper span was running (`context_tool_call`).
    pub(super) context_call: OnceLock<Option<(Call, String)>>,
    /// The tool call's arguments as read, and whether they nest past what is written whole.
    pub(super) arguments: OnceLock<(Option<Value>, bool)>,
    /// The MCP method the span says it calls (mcp.rs `method_of`).
    pub(super) method: OnceLock<Option<String>>,
    /// Whether the attributes or events mention `sextant.` at all.
    pub(super) sextant: OnceLock<bool>,
    /// Each of `SEXTANT_KEYS` as `sextant_value` reads it.
    sextant_values: [OnceLock<Option<Value>>; SEXTANT_KEYS.len()],
}

/// The `sextant.*` attributes the builder reads of a span (trajectory.rs `refine_kind`).
const SEXTANT_KEYS: [&str; 4] = [
    "sextant.approval.status",
    "sextant.policy.decision",
    "sextant.policy.name",
    "sextant.state.target",
];

/// A row and its decoded attributes.
pub struct SpanView<'a> {
    pub row: &'a Row<'a>,
    /// The row's attributes as read in this build, when the row keeps no memo of its own.
    read: SpanMemo,
}

/// A key as written in the text, or unescaped when it has escapes.
#[derive(Clone)]
enum Key {
    At(Range<usize>),
    Unescaped(String),
}

/// An object's top-level keys and where the text of their values is, in order.
type Entries = Vec<(Key, Range<usize>)>;

/// The top-level entries of a JSON object's text without decoding their values, when the
/// object nests at most `MAX_NESTING` levels; None for anything else (decoded whole then).
fn top_level(text: &str) -> Option<Entries> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut out = Vec::new();
    if b.get(i) == Some(&b'}') {
        return (skip_ws(b, i + 1) == b.len()).then_some(out);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let end = string_end(b, i)?;
        let raw = i + 1..end - 1;
        let key = if text[raw.clone()].contains('\\') {
            Key::Unescaped(serde_json::from_str::<String>(&text[i..end]).ok()?)
        } else {
            Key::At(raw)
        };
        i = skip_ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, i + 1);
        let stop = value_end(b, start)?;
        out.push((key, start..stop));
        i = skip_ws(b, stop);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return (skip_ws(b, i + 1) == b.len()).then_some(out),
            _ => return None,
        }
    }
}

const MAX_NESTING: usize = 128;

/// Finders kept per thread, at most this many: the words searched for are a few dozen literals.
const MAX_FINDERS: usize = 64;

thread_local! {
    /// The memmem finder of each word searched for, by the address of its text: building one
    /// took as long as searching a span's attributes with it.
    static FINDERS: RefCell<Vec<(usize, memchr::memmem::Finder<'static>)>> =
        const { RefCell::new(Vec::new()) };
}

/// Whether `text` holds `part`: memchr's vectorized search (`str::contains` took most of the
/// time on spans with kilobytes of messages, searched for several words each).
fn holds(text: &str, part: &str) -> bool {
    FINDERS.with(|finders| {
        let mut finders = finders.borrow_mut();
        let at = part.as_ptr() as usize;
        let kept = finders
            .iter()
            .find(|(a, f)| *a == at && f.needle() == part.as_bytes());
        if let Some((_, finder)) = kept {
            return finder.find(text.as_bytes()).is_some();
        }
        let finder = memchr::memmem::Finder::new(part.as_bytes()).into_owned();
        let found = finder.find(text.as_bytes()).is_some();
        if finders.len() == MAX_FINDERS {
            finders.clear(); // words made at run time, each searched for once or twice
        }
        finders.push((at, finder));
        found
    })
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index just past the string opening at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j += memchr::memchr2(b'"', b'\\', &b[j..])?;
        if b[j] == b'\\' {
            j += 2;
        } else {
            return Some(j + 1);
        }
    }
}

/// The index just past the value starting at `i` (its text is checked when it is decoded).
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let (mut depth, mut j) = (0usize, i);
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        if depth > MAX_NESTING - 1 {
                            return None;
                        }
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// Python's truth of an optional text: None and "" are false.
pub fn filled(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

pub const REMOTE_PARENT: u32 = 0x300;

/// The parent lives in another service's trace data: the span is a local root.
pub fn remote_parent(row: &Row) -> bool {
    filled(row.parent_span_id).is_some() && row.flags.unwrap_or(0) & REMOTE_PARENT == REMOTE_PARENT
}

/// JSON text as orjson reads it, for text the builder decodes whole (a span's attributes or
/// events, a tool's arguments): refused when it is not JSON or nests past what this reads.
pub fn loads(text: &str, what: &str) -> Result<Value, Fail> {
    match read_json(text) {
        Read::Value(v) => Ok(v),
        Read::Invalid => Err(Fail::unsupported(format!("{what} is not JSON"))),
        Read::TooDeep => Err(Fail::unsupported(format!("{what} nests too deep"))),
    }
}

impl<'a> SpanView<'a> {
    pub fn new(row: &'a Row<'a>) -> Self {
        Self {
            row,
            read: SpanMemo::default(),
        }
    }

    fn memo(&self) -> &SpanMemo {
        self.row.memo.unwrap_or(&self.read)
    }

    pub fn attrs(&self) -> Result<&Map<String, Value>, Fail> {
        let memo = self.memo();
        if let Some(a) = memo.attrs.get() {
            return Ok(a);
        }
        let parsed = match loads(self.row.attributes.unwrap_or("{}"), "span attributes")? {
            Value::Object(m) => m,
            _ => return Err(Fail::unsupported("span attributes are not an object")),
        };
        Ok(memo.attrs.get_or_init(|| parsed))
    }

    /// Whether the attributes may hold `key`: the decoder writes keys as they are (they need
    /// no escaping), so attribute JSON without the text has no such key and is not decoded
    /// (a span's attributes are always an object; text that is not one is still decoded,
    /// and refused).
    pub fn may_have(&self, key: &str) -> bool {
        let text = self.row.attributes.unwrap_or("{}");
        !text.starts_with('{') || holds(text, key)
    }

    /// `attrs.get(key)` (JSON null included), decoding only that value when the attributes
    /// may hold it: a model call's messages are not decoded to find its operation name.
    pub fn get(&self, key: &str) -> Result<Option<Value>, Fail> {
        let memo = self.memo();
        if let Some(attrs) = memo.attrs.get() {
            return Ok(attrs.get(key).cloned());
        }
        let text = self.row.attributes.unwrap_or("{}");
        // a kept span's index answers at once; a fresh one is made only for a key the text
        // may hold
        let index = match memo.index.get() {
            Some(index) if self.row.memo.is_some() => index,
            _ if !self.may_have(key) => return Ok(None),
            _ => memo.index.get_or_init(|| top_level(text)),
        };
        let Some(index) = index else {
            return Ok(self.attrs()?.get(key).cloned());
        };
        let named = |k: &Key| match k {
            Key::At(at) => &text[at.clone()] == key,
            Key::Unescaped(k) => k == key,
        };
        match index.iter().rev().find(|(k, _)| named(k)) {
            None => Ok(None),
            Some((_, at)) => loads(&text[at.clone()], "a span attribute").map(Some),
        }
    }

    /// What `read` finds in this span alone, read once when the span keeps a memo (`pick`:
    /// where in it).
    pub fn once<T: Clone>(
        &self,
        pick: impl FnOnce(&SpanMemo) -> &OnceLock<T>,
        read: impl FnOnce(&Self) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let cell = pick(self.memo());
        if let Some(found) = cell.get() {
            return Ok(found.clone());
        }
        let found = read(self)?;
        Ok(cell.get_or_init(|| found).clone())
    }

    pub fn mentions(&self, text: &str) -> bool {
        holds(self.row.attributes.unwrap_or(""), text) || holds(self.row.events.unwrap_or(""), text)
    }

    /// A `sextant.*` attribute of the span, or of one of its events (None for JSON null).
    pub fn sextant_value(&self, key: &str) -> Result<Option<Value>, Fail> {
        match SEXTANT_KEYS.iter().position(|k| *k == key) {
            Some(at) => self.once(|m| &m.sextant_values[at], |s| s.read_sextant(key)),
            None => self.read_sextant(key),
        }
    }

    fn read_sextant(&self, key: &str) -> Result<Option<Value>, Fail> {
        if !self.mentions(key) {
            return Ok(None);
        }
        if let Some(v) = self.get(key)? {
            return Ok(Some(v).filter(|v| !v.is_null()));
        }
        let events = loads(self.row.events.unwrap_or("[]"), "span events")?;
        let Value::Array(events) = events else {
            return Err(Fail::unsupported("span events are not a list"));
        };
        for event in events {
            let Value::Object(event) = event else {
                return Err(Fail::unsupported("a span event is not an object"));
            };
            match event.get("attributes") {
                None => {}
                Some(Value::Object(attrs)) => {
                    if let Some(v) = attrs.get(key) {
                        return Ok(Some(v.clone()).filter(|v| !v.is_null()));
                    }
                }
                Some(_) => return Err(Fail::unsupported("event attributes are not an object")),
            }
        }
        Ok(None)
    }

    /// LangGraph + OpenInference marks every node visit AGENT; those are not agents.
    pub fn is_graph_node(&self) -> Result<bool, Fail> {
        if !self.mentions("langgraph_node") {
            return Ok(false);
        }
        Ok(match self.get("metadata")? {
            None => false,
            Some(v) => super::messages::py_str(&v).contains("langgraph_node"),
        })
    }

    pub fn explicit_agent(&self) -> Result<bool, Fail> {
        for key in ["gen_ai.agent.name", "agent.name"] {
            if self.get(key)?.is_some_and(|v| crate::semconv::truthy(&v)) {
                return Ok(true);
            }
        }
        let name = self.row.name.unwrap_or("");
        Ok(name.starts_with("invoke_agent ")
            || name.starts_with("create_agent ")
            || name.ends_with(".agent"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_made_at_run_time_are_found_as_they_read_now() {
        // More words than the kept finders, each dropped before the next is made: one may reuse
        // the address of an earlier one, whose finder must not answer for it.
        for i in 0..3 * MAX_FINDERS {
            let word = format!("w{i}x");
            let text = format!("{{\"w{}x\": 1}}", i / 2 * 2);
            assert_eq!(holds(&text, &word), i % 2 == 0, "{word} in {text}");
        }
        assert!(holds("{\"cost\": 1}", "cost") && !holds("{}", "cost"));
    }

    #[test]
    fn top_level_entries_keep_every_key_and_its_value_text() {
        let text = r#"{"a": {"b": [1, "}"]}, "k\"q": "v\\", "n":-1.5e3 ,"a":null}"#;
        let entries = top_level(text).unwrap();
        let keys: Vec<&str> = entries
            .iter()
            .map(|(k, _)| match k {
                Key::At(at) => &text[at.clone()],
                Key::Unescaped(k) => k,
            })
            .collect();
        assert_eq!(keys, ["a", "k\"q", "n", "a"]);
        assert_eq!(&text[entries[0].1.clone()], r#"{"b": [1, "}"]}"#);
        assert_eq!(&text[entries[2].1.clone()], "-1.5e3");
        assert!(top_level("[1]").is_none());
        assert!(top_level(r#"{"a": 1} x"#).is_none());
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(top_level(&deep).is_none());
    }
}

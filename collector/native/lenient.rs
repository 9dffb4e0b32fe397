//! Protobuf request bytes made to read under prost as they read under upb (Python's protobuf).
//!
//! Where the two differ on an export request:
//! - upb keeps a known field that arrives with the wrong wire type as an unknown field (so the
//!   field reads as unset); prost refuses the whole message.
//! - upb knows `AnyValue.string_value_strindex` (field 8, a Profiles-only member of the value
//!   oneof); prost does not. When it is the last member set, the oneof holds it and the value
//!   reads as null in Python; prost would keep the member set before it.
//!
//! upb also drops the bits of a 10-byte varint past 64 (prost refuses it) and refuses a tag or
//! length longer than 5 bytes (prost reads it).
//!
//! `lenient` walks the bytes once without allocating; only when one of these occurs does it
//! rewrite them, dropping the fields upb would not read, or refuse them. Malformed bytes are
//! passed on as they are, for prost to report.

use std::borrow::Cow;

/// The message types of the trace and logs export requests.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(u8)]
pub enum Msg {
    TraceRequest,
    ResourceSpans,
    ScopeSpans,
    Span,
    Event,
    Link,
    Status,
    LogsRequest,
    ResourceLogs,
    ScopeLogs,
    LogRecord,
    Resource,
    EntityRef,
    Scope,
    KeyValue,
    AnyValue,
    ArrayValue,
    KvList,
}

/// How a known field is encoded.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Varint,
    I64,
    I32,
    Len,
    Msg(Msg),
}

impl Kind {
    const fn wire_type(self) -> u8 {
        match self {
            Kind::Varint => 0,
            Kind::I64 => 1,
            Kind::Len | Kind::Msg(_) => 2,
            Kind::I32 => 5,
        }
    }
}

const MESSAGES: [Msg; 18] = [
    Msg::TraceRequest,
    Msg::ResourceSpans,
    Msg::ScopeSpans,
    Msg::Span,
    Msg::Event,
    Msg::Link,
    Msg::Status,
    Msg::LogsRequest,
    Msg::ResourceLogs,
    Msg::ScopeLogs,
    Msg::LogRecord,
    Msg::Resource,
    Msg::EntityRef,
    Msg::Scope,
    Msg::KeyValue,
    Msg::AnyValue,
    Msg::ArrayValue,
    Msg::KvList,
];
/// No message here has a field numbered above this.
const MAX_FIELD: usize = 16;
/// `field()` as a table for the hot walk: 0 for an unknown field, `0x80 | child` for a message,
/// else 1 + the wire type.
const TABLE: [[u8; MAX_FIELD + 1]; 18] = table();

const fn table() -> [[u8; MAX_FIELD + 1]; 18] {
    let mut out = [[0; MAX_FIELD + 1]; 18];
    let mut m = 0;
    while m < MESSAGES.len() {
        let mut num = 1;
        while num <= MAX_FIELD {
            out[m][num] = match field(MESSAGES[m], num as u64) {
                None => 0,
                Some(Kind::Msg(child)) => 0x80 | child as u8,
                Some(kind) => 1 + kind.wire_type(),
            };
            num += 1;
        }
        m += 1;
    }
    out
}

/// The field `num` of `msg` as prost's generated types declare it (plus the strindex member).
const fn field(msg: Msg, num: u64) -> Option<Kind> {
    use Kind::{Len, Varint, I32, I64};
    let kind = match (msg, num) {
        (Msg::TraceRequest, 1) => Kind::Msg(Msg::ResourceSpans),
        (Msg::ResourceSpans, 1) | (Msg::ResourceLogs, 1) => Kind::Msg(Msg::Resource),
        (Msg::ResourceSpans, 2) => Kind::Msg(Msg::ScopeSpans),
        (Msg::ResourceSpans | Msg::ResourceLogs | Msg::ScopeSpans | Msg::ScopeLogs, 3) => Len,
        (Msg::ScopeSpans, 1) | (Msg::ScopeLogs, 1) => Kind::Msg(Msg::Scope),
        (Msg::ScopeSpans, 2) => Kind::Msg(Msg::Span),
        (Msg::Span, 1..=5) => Len,
        (Msg::Span, 6 | 10 | 12 | 14) => Varint,
        (Msg::Span, 7 | 8) => I64,
        (Msg::Span, 9) => Kind::Msg(Msg::KeyValue),
        (Msg::Span, 11) => Kind::Msg(Msg::Event),
        (Msg::Span, 13) => Kind::Msg(Msg::Link),
        (Msg::Span, 15) => Kind::Msg(Msg::Status),
        (Msg::Span, 16) => I32,
        (Msg::Event, 1) => I64,
        (Msg::Event, 2) => Len,
        (Msg::Event, 3) => Kind::Msg(Msg::KeyValue),
        (Msg::Event, 4) => Varint,
        (Msg::Link, 1..=3) => Len,
        (Msg::Link, 4) => Kind::Msg(Msg::KeyValue),
        (Msg::Link, 5) => Varint,
        (Msg::Link, 6) => I32,
        (Msg::Status, 2) => Len,
        (Msg::Status, 3) => Varint,
        (Msg::LogsRequest, 1) => Kind::Msg(Msg::ResourceLogs),
        (Msg::ResourceLogs, 2) => Kind::Msg(Msg::ScopeLogs),
        (Msg::ScopeLogs, 2) => Kind::Msg(Msg::LogRecord),
        (Msg::LogRecord, 1 | 11) => I64,
        (Msg::LogRecord, 2 | 7) => Varint,
        (Msg::LogRecord, 3 | 9 | 10 | 12) => Len,
        (Msg::LogRecord, 5) => Kind::Msg(Msg::AnyValue),
        (Msg::LogRecord, 6) => Kind::Msg(Msg::KeyValue),
        (Msg::LogRecord, 8) => I32,
        (Msg::Resource, 1) => Kind::Msg(Msg::KeyValue),
        (Msg::Resource, 2) => Varint,
        (Msg::Resource, 3) => Kind::Msg(Msg::EntityRef),
        (Msg::EntityRef, 1..=4) => Len,
        (Msg::Scope, 1 | 2) => Len,
        (Msg::Scope, 3) => Kind::Msg(Msg::KeyValue),
        (Msg::Scope, 4) => Varint,
        (Msg::KeyValue, 1) => Len,
        (Msg::KeyValue, 2) => Kind::Msg(Msg::AnyValue),
        (Msg::AnyValue, 1 | 7) => Len,
        (Msg::AnyValue, 2 | 3 | STRINDEX) => Varint,
        (Msg::AnyValue, 4) => I64,
        (Msg::AnyValue, 5) => Kind::Msg(Msg::ArrayValue),
        (Msg::AnyValue, 6) => Kind::Msg(Msg::KvList),
        (Msg::ArrayValue, 1) => Kind::Msg(Msg::AnyValue),
        (Msg::KvList, 1) => Kind::Msg(Msg::KeyValue),
        _ => return None,
    };
    Some(kind)
}

/// `AnyValue.string_value_strindex`, known to upb only.
const STRINDEX: u64 = 8;
/// prost's (and upb's) limit on message nesting; deeper bytes are left for prost to refuse.
const MAX_DEPTH: u32 = 100;
/// upb reads a tag or a length from at most 5 bytes (prost from up to 10).
const MAX_SHORT_VARINT: usize = 5;

/// Why the bytes are passed to prost as they are, or refused outright.
#[derive(Debug, PartialEq)]
enum Bad {
    /// prost refuses them too (truncated, an invalid tag, nested too deep, ...).
    Malformed,
    /// prost would read them, upb does not: the detail of the error.
    Refused(&'static str),
}

/// `data` as prost should decode it to read what upb reads, or the reason upb refuses it.
pub fn lenient(data: &[u8], root: Msg) -> Result<Cow<'_, [u8]>, &'static str> {
    match scan(data, root, 0) {
        Ok(false) | Err(Bad::Malformed) => Ok(Cow::Borrowed(data)),
        Err(Bad::Refused(why)) => Err(why),
        Ok(true) => {
            let mut out = Vec::with_capacity(data.len());
            match repair(data, root, 0, &mut out) {
                Ok(()) => Ok(Cow::Owned(out)),
                Err(Bad::Refused(why)) => Err(why),
                Err(Bad::Malformed) => Ok(Cow::Borrowed(data)),
            }
        }
    }
}

/// One field as it lies in the buffer.
struct Field {
    num: u64,
    wire_type: u8,
    /// The tag's bytes.
    tag: std::ops::Range<usize>,
    /// A varint field's value.
    value: u64,
    /// Its payload: a length-delimited field's without the length, a fixed field's bytes.
    body: std::ops::Range<usize>,
}

/// Reads fields from one message's bytes.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// A varint value ran to 10 bytes with bits past 64 set: upb drops those bits, prost
    /// refuses the varint.
    overlong: bool,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Cursor {
            buf,
            pos: 0,
            overlong: false,
        }
    }

    fn more(&self) -> bool {
        self.pos < self.buf.len()
    }

    /// A varint of at most `max` bytes; its low 64 bits, as upb keeps them.
    fn varint(&mut self, max: usize) -> Result<u64, Bad> {
        let mut value = 0u64;
        for i in 0..10 {
            let byte = *self.buf.get(self.pos).ok_or(Bad::Malformed)?;
            self.pos += 1;
            if i == max {
                return Err(Bad::Refused("a tag or length longer than 5 bytes"));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                if i == 9 && byte > 1 {
                    self.overlong = true;
                }
                return Ok(value);
            }
        }
        Err(Bad::Malformed)
    }

    fn skip(&mut self, n: usize) -> Result<std::ops::Range<usize>, Bad> {
        let start = self.pos;
        let end = start
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or(Bad::Malformed)?;
        self.pos = end;
        Ok(start..end)
    }

    /// The next field; an end-group tag here is malformed.
    fn field(&mut self, depth: u32) -> Result<Field, Bad> {
        let start = self.pos;
        let tag = self.varint(MAX_SHORT_VARINT)?;
        let tag_range = start..self.pos;
        let (num, wire_type) = (tag >> 3, (tag & 7) as u8);
        if num == 0 || tag > u64::from(u32::MAX) {
            return Err(Bad::Malformed);
        }
        let mut value = 0;
        let body = match wire_type {
            0 => {
                let at = self.pos;
                value = self.varint(10)?;
                at..self.pos
            }
            1 => self.skip(8)?,
            2 => {
                let len = self.varint(MAX_SHORT_VARINT)?;
                self.skip(usize::try_from(len).map_err(|_| Bad::Malformed)?)?
            }
            3 => {
                let at = self.pos;
                self.skip_group(num, depth + 1)?;
                at..self.pos
            }
            5 => self.skip(4)?,
            _ => return Err(Bad::Malformed),
        };
        Ok(Field {
            num,
            wire_type,
            tag: tag_range,
            value,
            body,
        })
    }

    /// Skips a group's fields up to its end-group tag.
    fn skip_group(&mut self, num: u64, depth: u32) -> Result<(), Bad> {
        if depth > MAX_DEPTH {
            return Err(Bad::Malformed);
        }
        loop {
            let before = self.pos;
            let tag = self.varint(MAX_SHORT_VARINT)?;
            if tag & 7 == 4 {
                return if tag >> 3 == num {
                    Ok(())
                } else {
                    Err(Bad::Malformed)
                };
            }
            self.pos = before;
            self.field(depth)?;
        }
    }
}

/// Whether `buf` (a `msg`) holds something prost reads otherwise than upb.
///
/// Single-byte tags and varints are read inline and fields looked up in `TABLE`; anything
/// longer goes through `Cursor`.
fn scan(buf: &[u8], msg: Msg, depth: u32) -> Result<bool, Bad> {
    if depth > MAX_DEPTH {
        return Err(Bad::Malformed);
    }
    let row = &TABLE[msg as usize];
    let any_value = msg == Msg::AnyValue;
    let mut cursor = Cursor::new(buf);
    let mut dirty = false;
    // The oneof member an AnyValue ends on, and whether another came before a last strindex.
    let (mut last, mut other) = (0, false);
    while let Some(&first) = buf.get(cursor.pos) {
        let tag = if first < 0x80 {
            cursor.pos += 1;
            u64::from(first)
        } else {
            cursor.varint(MAX_SHORT_VARINT)?
        };
        let (num, wire_type) = (tag >> 3, (tag & 7) as u8);
        if num == 0 || tag > u64::from(u32::MAX) {
            return Err(Bad::Malformed);
        }
        // Where the field's payload starts (it ends at the cursor).
        let start = match wire_type {
            0 => {
                match buf.get(cursor.pos) {
                    Some(&b) if b < 0x80 => cursor.pos += 1,
                    _ => {
                        cursor.varint(10)?;
                    }
                }
                cursor.pos
            }
            2 => {
                let len = match buf.get(cursor.pos) {
                    Some(&b) if b < 0x80 => {
                        cursor.pos += 1;
                        usize::from(b)
                    }
                    _ => usize::try_from(cursor.varint(MAX_SHORT_VARINT)?)
                        .map_err(|_| Bad::Malformed)?,
                };
                cursor.skip(len)?.start
            }
            1 => cursor.skip(8)?.start,
            5 => cursor.skip(4)?.start,
            3 => {
                cursor.skip_group(num, depth + 1)?;
                cursor.pos
            }
            _ => return Err(Bad::Malformed),
        };
        let code = if num as usize <= MAX_FIELD {
            row[num as usize]
        } else {
            0
        };
        if code == 0 {
            continue;
        }
        let expected = if code & 0x80 != 0 { 2 } else { code - 1 };
        if expected != wire_type {
            dirty = true;
            continue;
        }
        if any_value {
            other |= last != 0 && last != STRINDEX;
            last = num;
        }
        if code & 0x80 != 0 {
            let child = MESSAGES[usize::from(code & 0x7f)];
            dirty |= scan(&buf[start..cursor.pos], child, depth + 1)?;
        }
    }
    Ok(dirty || cursor.overlong || (last == STRINDEX && other))
}

/// Writes `buf` (a `msg`) to `out` as prost should read it: only the fields upb reads (no
/// unknown ones, which neither decoder keeps), varints in their shortest form.
fn repair(buf: &[u8], msg: Msg, depth: u32, out: &mut Vec<u8>) -> Result<(), Bad> {
    if depth > MAX_DEPTH {
        return Err(Bad::Malformed);
    }
    let drop_oneof = msg == Msg::AnyValue && strindex_last(buf)?;
    let mut cursor = Cursor::new(buf);
    while cursor.more() {
        let f = cursor.field(depth)?;
        let Some(kind) = field(msg, f.num).filter(|k| k.wire_type() == f.wire_type) else {
            continue;
        };
        if drop_oneof || (msg == Msg::AnyValue && f.num == STRINDEX) {
            // The oneof reads as unset: drop every member (prost does not know strindex).
            continue;
        }
        out.extend_from_slice(&buf[f.tag.clone()]);
        match kind {
            Kind::Varint => write_varint(out, f.value),
            Kind::I64 | Kind::I32 => out.extend_from_slice(&buf[f.body]),
            Kind::Len => {
                write_varint(out, f.body.len() as u64);
                out.extend_from_slice(&buf[f.body]);
            }
            Kind::Msg(child) => {
                let mut inner = Vec::with_capacity(f.body.len());
                repair(&buf[f.body], child, depth + 1, &mut inner)?;
                write_varint(out, inner.len() as u64);
                out.extend_from_slice(&inner);
            }
        }
    }
    Ok(())
}

/// Whether this AnyValue's oneof ends on the strindex member after another member was set.
fn strindex_last(buf: &[u8]) -> Result<bool, Bad> {
    let mut cursor = Cursor::new(buf);
    let (mut last, mut other) = (0, false);
    while cursor.more() {
        let f = cursor.field(0)?;
        if field(Msg::AnyValue, f.num).is_some_and(|k| k.wire_type() == f.wire_type) {
            other |= last != 0 && last != STRINDEX;
            last = f.num;
        }
    }
    Ok(last == STRINDEX && other)
}

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message;

    fn tag(out: &mut Vec<u8>, num: u64, wire_type: u64) {
        write_varint(out, num << 3 | wire_type);
    }

    fn len(num: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        tag(&mut out, num, 2);
        write_varint(&mut out, payload.len() as u64);
        out.extend_from_slice(payload);
        out
    }

    fn var(num: u64, v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        tag(&mut out, num, 0);
        write_varint(&mut out, v);
        out
    }

    fn request_with_span(span: &[u8]) -> Vec<u8> {
        len(1, &len(2, &len(2, span)))
    }

    fn ids() -> Vec<u8> {
        [len(1, &[1; 16]), len(2, &[2; 8])].concat()
    }

    fn decode(data: &[u8]) -> Result<ExportTraceServiceRequest, String> {
        let data = lenient(data, Msg::TraceRequest)?;
        ExportTraceServiceRequest::decode(&*data).map_err(|e| e.to_string())
    }

    fn borrowed(data: &[u8], root: Msg) -> bool {
        matches!(lenient(data, root), Ok(Cow::Borrowed(_)))
    }

    #[test]
    fn clean_bytes_are_borrowed_not_copied() {
        let data = request_with_span(&[ids(), len(5, b"name")].concat());
        assert!(borrowed(&data, Msg::TraceRequest));
        let span = &decode(&data).unwrap().resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.name, "name");
    }

    #[test]
    fn known_field_with_wrong_wire_type_reads_as_unset() {
        // Span.name (a string) sent as a varint, then Span.kind (a varint) sent as fixed32.
        let mut span = [ids(), var(5, 7), len(3, b"ts")].concat();
        tag(&mut span, 6, 5);
        span.extend_from_slice(&[1, 0, 0, 0]);
        let data = request_with_span(&span);
        assert!(ExportTraceServiceRequest::decode(&*data).is_err());
        let request = decode(&data).unwrap();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(
            (span.name.as_str(), span.kind, span.trace_state.as_str()),
            ("", 0, "ts")
        );
        assert_eq!(span.trace_id, [1; 16]);
    }

    #[test]
    fn message_field_sent_as_varint_is_dropped() {
        let data = [len(1, &len(2, b"")), var(1, 5)].concat();
        assert_eq!(decode(&data).unwrap().resource_spans.len(), 1);
    }

    #[test]
    fn wrong_wire_type_as_a_group_is_skipped_whole() {
        let mut span = ids();
        tag(&mut span, 5, 3);
        span.extend(var(1, 1));
        tag(&mut span, 5, 4);
        span.extend(len(3, b"after"));
        let request = decode(&request_with_span(&span)).unwrap();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.trace_state, "after");
    }

    #[test]
    fn nested_lengths_are_rewritten() {
        // A KeyValue deep in an attribute with a mistyped key; the enclosing lengths shrink.
        let inner_kv = [var(1, 3), len(2, &len(1, b"v"))].concat();
        let kvlist = len(6, &len(1, &inner_kv));
        let span = [ids(), len(9, &[len(1, b"k"), len(2, &kvlist)].concat())].concat();
        let request = decode(&request_with_span(&span)).unwrap();
        let kv = &request.resource_spans[0].scope_spans[0].spans[0].attributes[0];
        let Some(Any::KvlistValue(list)) = &kv.value.as_ref().unwrap().value else {
            panic!("{kv:?}")
        };
        assert_eq!(list.values[0].key, "");
        assert_eq!(
            list.values[0].value.as_ref().unwrap().value,
            Some(Any::StringValue("v".into()))
        );
    }

    #[test]
    fn strindex_after_a_member_makes_the_value_unset() {
        let any = [len(1, b"abc"), var(STRINDEX, 3)].concat();
        let span = [ids(), len(9, &[len(1, b"k"), len(2, &any)].concat())].concat();
        let request = decode(&request_with_span(&span)).unwrap();
        let kv = &request.resource_spans[0].scope_spans[0].spans[0].attributes[0];
        assert_eq!(kv.key, "k");
        assert_eq!(kv.value.as_ref().unwrap().value, None);
    }

    #[test]
    fn member_after_strindex_wins_as_usual() {
        let any = [var(STRINDEX, 3), len(1, b"abc")].concat();
        let data = request_with_span(&[ids(), len(9, &len(2, &any))].concat());
        assert!(borrowed(&data, Msg::TraceRequest));
        let request = decode(&data).unwrap();
        let kv = &request.resource_spans[0].scope_spans[0].spans[0].attributes[0];
        assert_eq!(
            kv.value.as_ref().unwrap().value,
            Some(Any::StringValue("abc".into()))
        );
    }

    #[test]
    fn malformed_bytes_are_left_for_prost_to_refuse() {
        // A mistyped field, then a length running past the end.
        let mut data = [len(1, &var(2, 1))].concat();
        data.extend_from_slice(&[0x0a, 0x05, 0x01]);
        assert!(borrowed(&data, Msg::TraceRequest));
        assert!(decode(&data).is_err());
        assert!(decode(&[0x00, 0x00]).is_err());
    }

    #[test]
    fn unknown_fields_of_any_wire_type_are_kept() {
        let mut data = var(9, 1);
        tag(&mut data, 10, 1);
        data.extend_from_slice(&[0; 8]);
        tag(&mut data, 11, 3);
        tag(&mut data, 11, 4);
        assert!(borrowed(&data, Msg::TraceRequest));
        assert!(decode(&data).is_ok());
    }

    #[test]
    fn log_record_fields_are_checked_too() {
        // LogRecord.severity_text (a string) sent as fixed64, body a string.
        let mut record = Vec::new();
        tag(&mut record, 3, 1);
        record.extend_from_slice(&[0; 8]);
        record.extend(len(5, &len(1, b"hi")));
        let data = len(1, &len(2, &len(2, &record)));
        assert!(ExportLogsServiceRequest::decode(&*data).is_err());
        let repaired = lenient(&data, Msg::LogsRequest).unwrap();
        let request = ExportLogsServiceRequest::decode(&*repaired).unwrap();
        let record = &request.resource_logs[0].scope_logs[0].log_records[0];
        assert_eq!(record.severity_text, "");
        assert_eq!(
            record.body.as_ref().unwrap().value,
            Some(Any::StringValue("hi".into()))
        );
    }

    #[test]
    fn overlong_varint_value_keeps_its_low_64_bits() {
        // Span.flags (fixed32) is fine; dropped_attributes_count (10) as a 10-byte varint with
        // bits past 64 set, and an unknown varint field likewise.
        let mut span = ids();
        tag(&mut span, 10, 0);
        span.extend_from_slice(&[0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f]);
        tag(&mut span, 99, 0);
        span.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02]);
        let data = request_with_span(&span);
        assert!(ExportTraceServiceRequest::decode(&*data).is_err());
        let request = decode(&data).unwrap();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.dropped_attributes_count, 5);
    }

    #[test]
    fn tag_or_length_longer_than_5_bytes_is_refused() {
        // Span.name's tag padded to 6 bytes; then its length padded to 6 bytes.
        let mut span = ids();
        span.extend_from_slice(&[0xaa, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01, b'x']);
        let data = request_with_span(&span);
        assert!(ExportTraceServiceRequest::decode(&*data).is_ok());
        assert_eq!(
            lenient(&data, Msg::TraceRequest).unwrap_err(),
            "a tag or length longer than 5 bytes"
        );
        let mut span = ids();
        span.extend_from_slice(&[0x2a, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, b'x']);
        assert!(lenient(&request_with_span(&span), Msg::TraceRequest).is_err());
        // 5 bytes are fine.
        let mut span = ids();
        span.extend_from_slice(&[0xaa, 0x80, 0x80, 0x80, 0x00, 0x01, b'x']);
        assert!(decode(&request_with_span(&span)).is_ok());
    }

    #[test]
    fn padding_inside_an_unknown_length_delimited_field_is_not_read() {
        // upb skips an unknown field's payload unread, whatever it holds.
        let mut span = ids();
        span.extend(len(99, &[0xaa, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]));
        assert!(borrowed(&request_with_span(&span), Msg::TraceRequest));
    }

    #[test]
    fn table_agrees_with_field() {
        for (m, &msg) in MESSAGES.iter().enumerate() {
            assert_eq!(msg as usize, m);
            for num in 1..=40u64 {
                let code = TABLE[m].get(num as usize).copied().unwrap_or(0);
                let expected = match field(msg, num) {
                    None => 0,
                    Some(Kind::Msg(child)) => 0x80 | child as u8,
                    Some(kind) => 1 + kind.wire_type(),
                };
                assert_eq!(code, expected, "{msg:?} field {num}");
            }
        }
    }

    #[test]
    fn over_long_varints_and_bad_tags_are_malformed() {
        let mut c = Cursor::new(&[0xff; 11]);
        assert_eq!(c.varint(10), Err(Bad::Malformed));
        let mut c = Cursor::new(&[0x80, 0x01]);
        assert_eq!(c.varint(10), Ok(128));
        assert!(!c.overlong);
        assert!(borrowed(&[0x00, 0x00], Msg::TraceRequest));
        assert!(decode(&[0x00, 0x00]).is_err());
    }
}

//! The steps' `attributes` column: each step's span attributes as the JSON text the span was
//! stored with (the Python builder's `Step.attributes_json`), row for row beside the `steps`
//! table. The store's `steps` table does not carry it; the rule interpreter reads it (approval
//! overrides, attribute conditions of step matchers), so the builder hands it over with the
//! round instead of Python joining it from the spans.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, StructArray};
use arrow_schema::{DataType, Field, Fields};

use super::span::Row;
use super::trajectory::Step;

/// The column being filled, when it is asked for.
pub struct StepAttributes {
    column: Option<StringBuilder>,
}

impl StepAttributes {
    /// A column filled only when `wanted` (a round built for storage alone does without),
    /// room made at once for the round's `rows` (a step is a row at most, once).
    pub fn new(wanted: bool, rows: &[Row]) -> Self {
        let column = wanted.then(|| {
            let bytes = rows.iter().map(|r| r.attributes.map_or(0, str::len)).sum();
            StringBuilder::with_capacity(rows.len(), bytes)
        });
        Self { column }
    }

    /// A trajectory's steps, in the order `Tables::add` writes them; `rows` are the trace's
    /// rows as given to `build_trajectory` (a step's `source` indexes them).
    pub fn add(&mut self, steps: &[Step], rows: &[&Row]) {
        if let Some(column) = &mut self.column {
            for step in steps {
                column.append_option(rows[step.source].attributes);
            }
        }
    }

    /// A one-column batch (`attributes`), or None when it was not asked for.
    pub fn finish(self) -> Option<StructArray> {
        let mut column = self.column?;
        let field = Field::new("attributes", DataType::Utf8, true);
        let array: ArrayRef = Arc::new(column.finish());
        Some(StructArray::new(
            Fields::from(vec![field]),
            vec![array],
            None,
        ))
    }
}

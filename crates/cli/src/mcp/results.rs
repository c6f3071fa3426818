//! How tools and envelopes look in MCP: the name a tool is listed by, the pages of `tools/list`, and the call result of an envelope.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, MetaObject};
use serde_json::Value;
use toolsmith_registry::{Body, Catalog, Envelope, Policy, Tool, ToolName};

/// What a cursor starts with; what follows is the last name of the previous page.
const CURSOR_TAG: &str = "after:";

/// The `_meta` key of a call result that carries the envelope's run metadata.
pub(super) const META_METADATA: &str = "toolsmith/metadata";

/// The `_meta` key of a failed call result that carries the envelope's `error_code`.
pub(super) const META_ERROR_CODE: &str = "toolsmith/error_code";

/// The name a tool is listed and called by.
pub(super) fn listed_name(prefix: &str, name: &ToolName) -> String {
    format!("{prefix}{name}")
}

/// One page of a listing: which names, and the cursor of the next page.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Page {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) next_cursor: Option<String>,
}

/// The page of the sorted `names` that follows `cursor`, or `None` for a cursor this server did
/// not write.
pub(super) fn page(names: &[&str], cursor: Option<&str>, size: usize) -> Option<Page> {
    let start = match cursor {
        None => 0,
        Some(cursor) => {
            let after = cursor.strip_prefix(CURSOR_TAG)?;
            names.partition_point(|name| *name <= after)
        }
    };
    let end = names.len().min(start + size);
    let next_cursor =
        (end < names.len() && end > start).then(|| format!("{CURSOR_TAG}{}", names[end - 1]));
    Some(Page {
        start,
        end,
        next_cursor,
    })
}

/// An envelope as an MCP call result.
///
/// - Success: the result as text (a text result as is, JSON serialized); when the tool declares
///   an output schema and the result meets it, also as `structuredContent`. A result that does
///   not meet the schema is the operation error a tool may report (`{"error": ...}`, which the
///   registry exempts from the schema): it is `isError`, since MCP requires conforming
///   structured content from a tool with an output schema.
/// - Failure (including invalid arguments and policy denials): `isError` with the sentence and
///   the error code; the code is also in `_meta`.
/// - Always: the run's metadata in `_meta`.
pub(super) fn call_result(tool: Option<&Tool>, envelope: &Envelope) -> CallToolResult {
    let mut meta = JsonObject::new();
    meta.insert(
        META_METADATA.to_owned(),
        serde_json::to_value(&envelope.metadata).unwrap_or(Value::Null),
    );
    let mut result = match &envelope.body {
        Body::Success { result } => {
            let text = match result {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            match tool.and_then(Tool::output_schema) {
                Some(schema) if schema.violations(result).is_empty() => {
                    let mut structured = CallToolResult::structured(result.clone());
                    structured.content = vec![ContentBlock::text(text)];
                    structured
                }
                Some(_) => CallToolResult::error(vec![ContentBlock::text(text)]),
                None => CallToolResult::success(vec![ContentBlock::text(text)]),
            }
        }
        Body::Failure { error, error_code } => {
            meta.insert(META_ERROR_CODE.to_owned(), Value::from(error_code.as_str()));
            CallToolResult::error(vec![ContentBlock::text(format!(
                "{error} (error_code: {error_code})"
            ))])
        }
    };
    result.meta = Some(MetaObject(meta));
    result
}

/// Why a tool the generator reports registered is not served by this server (listed and
/// callable), or `None` when it is.
pub(super) fn why_not_served(
    catalog: &Catalog,
    policy: &Policy,
    report: &toolsmith_generator::Report,
) -> Option<String> {
    let Ok(name) = ToolName::new(&report.name) else {
        return Some(format!("{} is not a tool name", report.name));
    };
    let installed = report.path.as_deref();
    let same_file = |served: &std::path::Path| {
        installed.is_some_and(|installed| {
            installed == served
                || matches!(
                    (installed.canonicalize(), served.canonicalize()),
                    (Ok(left), Ok(right)) if left == right
                )
        })
    };
    match catalog.get(&name) {
        None if let Some(denied) = catalog.get_denied(&name) => Some(format!(
            "the tool {name} was registered but may not be called: {}",
            denied.denial
        )),
        None => Some(format!(
            "the tool {name} was written to {} but this server does not serve it: it reads no tools from there",
            installed
                .map(|path| path.display().to_string())
                .unwrap_or_default()
        )),
        Some(tool) if !same_file(tool.path()) => Some(format!(
            "the tool {name} was written to {} but this server serves the {name} of {} (layer {}), which wins over it",
            installed
                .map(|path| path.display().to_string())
                .unwrap_or_default(),
            tool.path().display(),
            tool.layer()
        )),
        Some(tool) => policy.check(tool).err().map(|denial| {
            format!("the tool {name} was registered but may not be called: {denial}")
        }),
    }
}

#[cfg(test)]
mod tests {
    use crate::mcp::results::{Page, page};

    fn check(names: &[&str], cursor: Option<&str>, expect: Option<(usize, usize, Option<&str>)>) {
        let expect = expect.map(|(start, end, next_cursor)| Page {
            start,
            end,
            next_cursor: next_cursor.map(str::to_owned),
        });
        assert_eq!(page(names, cursor, 2), expect, "{names:?} after {cursor:?}");
    }

    #[test]
    fn first_page_and_its_cursor() {
        check(&["a", "b", "c"], None, Some((0, 2, Some("after:b"))));
        check(&["a", "b"], None, Some((0, 2, None)));
        check(&[], None, Some((0, 0, None)));
    }

    #[test]
    fn later_pages_follow_the_last_name() {
        check(&["a", "b", "c"], Some("after:b"), Some((2, 3, None)));
        check(
            &["a", "b", "c", "d", "e"],
            Some("after:b"),
            Some((2, 4, Some("after:d"))),
        );
    }

    #[test]
    fn a_page_boundary_survives_changes() {
        // `b` was removed after the first page was served: the next page still starts at `c`.
        check(&["a", "c", "d"], Some("after:b"), Some((1, 3, None)));
        // Past the end: an empty last page.
        check(&["a"], Some("after:z"), Some((1, 1, None)));
    }

    #[test]
    fn foreign_cursors_are_rejected() {
        check(&["a"], Some("2"), None);
        check(&["a"], Some(""), None);
    }
}

//! Bad input, fuzzed with proptest: the manifest parser, the `description` and `--schema` probe
//! parsers, the schema compiler and the argument validator take arbitrary bytes and
//! structure-aware mutations of valid input without panicking or hanging, and every rejection
//! is an error with a non-empty one-line message.
//!
//! proptest's default of 256 cases per target keeps this within CI time; `PROPTEST_CASES` raises it for a
//! longer run.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::formats::ikigai;
use crate::formats::kodelet;
use crate::formats::manifest;
use crate::message::error_chain;
use crate::name::ToolName;
use crate::schema::InputSchema;

/// A hang guard per case, not a speed claim: every target is linear in its input or bounded by
/// the limits of `schema.rs`, so even a debug build on a loaded machine stays far below it.
const CASE_BOUND: Duration = Duration::from_secs(5);

const MANIFEST: &str = include_str!("../../../../examples/tools/word-count.md");

const DESCRIPTION: &str = r#"{"name": "hello", "description": "Say hello", "input_schema": {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[A-Z]", "minLength": 1}, "age": {"type": "integer", "minimum": 0}}, "required": ["name"]}}"#;

const IKIGAI_SCHEMA: &str = r#"{"name": "word_stats", "description": "Count words", "parameters": {"text": {"type": "string", "description": "The text", "required": true}, "top": {"type": "integer", "description": "How many"}}, "returns": {"type": "object"}}"#;

/// Lines that stress the frontmatter and body grammar when spliced into a manifest.
const TRICKY_LINES: &[&str] = &[
    "---",
    "parameters:",
    "  x:",
    "    type: integer",
    "    type: [string, null]",
    "    pattern: \"(a+)+$\"",
    "    pattern: \"(\"",
    "    enum: []",
    "    min: 10",
    "    max: -10",
    "    default: {a: [1, 2, {b: c}]}",
    "    items: {type: object}",
    "timeout_ms: 99999999999999999999999",
    "timeout_ms: -1",
    "name: Bad-Name!",
    "name: ''",
    "approval: sometimes",
    "env: {\"1BAD\": x}",
    "shell: fish",
    "cwd: ../../..",
    "a: &anchor [1, 2, 3]",
    "b: *anchor",
    "c: *missing",
    "? complex key",
    ": :",
    "- - -",
    "\t\ttabs: here",
    "{{# x }}",
    "{{/ x }}",
    "{{ x }}",
    "{{ }}",
    "{{#}}",
    "\u{feff}",
    "\u{0}",
];

/// Keywords and values that a structure-aware schema is assembled from.
fn schema_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(
            |number| serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number)
        ),
        prop::sample::select(vec![
            "object",
            "string",
            "integer",
            "number",
            "array",
            "boolean",
            "null",
            "#",
            "#/$defs/x",
            "^(a+)+$",
            "(",
            "[",
            "\\1",
            "(?=a)",
            "",
            "ü",
            "date-time",
        ])
        .prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        let key = prop::sample::select(vec![
            "type",
            "properties",
            "required",
            "items",
            "pattern",
            "patternProperties",
            "enum",
            "const",
            "minLength",
            "maxLength",
            "minimum",
            "maximum",
            "$ref",
            "$defs",
            "oneOf",
            "anyOf",
            "allOf",
            "not",
            "if",
            "then",
            "else",
            "additionalProperties",
            "format",
            "default",
            "$schema",
            "$id",
            "multipleOf",
            "uniqueItems",
            "x",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..6).prop_map(|map| Value::Object(
                map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

/// `text` with a few random byte edits: each `(position, byte, kind)` deletes, replaces or
/// inserts at `position` (taken modulo the length).
fn mutate(text: &str, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for &(position, byte, kind) in edits {
        let at = position % (bytes.len() + 1);
        match kind % 3 {
            0 if at < bytes.len() => {
                bytes.remove(at);
            }
            1 if at < bytes.len() => bytes[at] = byte,
            _ => bytes.insert(at, byte),
        }
    }
    bytes
}

fn edits() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..8)
}

/// The rejection's whole message (the error and its sources) is one non-empty line.
#[track_caller]
fn assert_clear(error: &dyn std::error::Error) {
    let message = error_chain(error);
    assert!(!message.trim().is_empty(), "an empty message");
    assert!(
        !message.contains('\n'),
        "a message over several lines: {message:?}"
    );
}

/// Runs `target` once, asserting the hang guard.
#[track_caller]
fn bounded<T>(target: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let output = target();
    assert!(
        started.elapsed() < CASE_BOUND,
        "took {:?}",
        started.elapsed()
    );
    output
}

fn check_manifest(text: &str) {
    let expected = ToolName::new("word_count").unwrap();
    if let Err(errors) = bounded(|| manifest::frontmatter::parse(text, Some(&expected))) {
        assert_clear(&errors);
    }
}

fn check_description(stdout: &[u8]) {
    if let Err(error) = bounded(|| kodelet::parse_description(stdout)) {
        assert_clear(&error);
    }
    if let Err(error) = bounded(|| kodelet::parse_config(stdout)) {
        assert_clear(&error);
    }
}

fn check_ikigai(stdout: &[u8]) {
    if let Err(error) = bounded(|| ikigai::parse_schema(stdout)) {
        assert_clear(&error);
    }
}

/// Compiles `schema`; when it is accepted, validates `arguments` against it.
fn check_schema(schema: Value, arguments: &Value) {
    match bounded(|| InputSchema::new(schema)) {
        Ok(schema) => {
            for violation in bounded(|| schema.violations(arguments)) {
                let message = violation.to_string();
                assert!(!violation.message.trim().is_empty(), "{violation:?}");
                assert!(!message.contains('\n'), "{message:?}");
            }
            let _completed = bounded(|| schema.with_defaults(arguments));
        }
        Err(error) => assert_clear(&error),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn manifest_from_arbitrary_text(text in "\\PC{0,600}") {
        check_manifest(&text);
        check_manifest(&format!("---\n{text}\n---\necho hi\n"));
    }

    #[test]
    fn manifest_with_byte_edits(edits in edits()) {
        check_manifest(&String::from_utf8_lossy(&mutate(MANIFEST, &edits)));
    }

    #[test]
    fn manifest_with_spliced_lines(
        splices in prop::collection::vec((any::<usize>(), prop::sample::select(TRICKY_LINES), any::<bool>()), 1..6),
    ) {
        let mut lines: Vec<&str> = MANIFEST.lines().collect();
        for (position, line, replace) in splices {
            let at = position % (lines.len() + 1);
            if replace && at < lines.len() {
                lines[at] = line;
            } else {
                lines.insert(at, line);
            }
        }
        check_manifest(&lines.join("\n"));
    }

    #[test]
    fn probe_output_from_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        check_description(&bytes);
        check_ikigai(&bytes);
    }

    #[test]
    fn probe_output_with_byte_edits(edits in edits()) {
        check_description(&mutate(DESCRIPTION, &edits));
        check_ikigai(&mutate(IKIGAI_SCHEMA, &edits));
    }

    #[test]
    fn probe_output_with_arbitrary_schemas(schema in schema_value(), name in "[a-z_-]{0,12}") {
        let description = json!({"name": name, "description": "d", "input_schema": schema});
        check_description(description.to_string().as_bytes());
        let ikigai = json!({"name": name, "description": "d", "parameters": schema, "returns": schema});
        check_ikigai(ikigai.to_string().as_bytes());
    }

    #[test]
    fn schemas_and_arguments(schema in schema_value(), arguments in schema_value()) {
        let object_schema = match schema {
            Value::Object(mut object) => {
                object.insert("type".to_owned(), json!("object"));
                Value::Object(object)
            }
            other => other,
        };
        check_schema(object_schema, &arguments);
    }
}

/// A "billion laughs" frontmatter: aliases that expand exponentially are refused, not expanded.
#[test]
fn manifest_alias_bomb_is_refused() {
    let mut frontmatter =
        String::from("name: word_count\ndescription: d\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..10 {
        let previous = level - 1;
        frontmatter.push_str(&format!(
            "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
        ));
    }
    let text = format!("---\n{frontmatter}---\necho hi\n");
    let expected = ToolName::new("word_count").unwrap();
    let errors = bounded(|| manifest::frontmatter::parse(&text, Some(&expected))).unwrap_err();
    assert_clear(&errors);
}

/// Probe output nested deeper than any schema may be is refused with a clear message.
#[test]
fn deeply_nested_probe_output_is_refused() {
    let nested = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let stdout = format!(r#"{{"name": "x", "description": "d", "input_schema": {nested}}}"#);
    let error = bounded(|| kodelet::parse_description(stdout.as_bytes())).unwrap_err();
    assert_clear(&error);
}

/// Found by `manifest_with_byte_edits`: a tag broken over two lines was quoted verbatim, so
/// the message took two lines.
#[test]
fn a_tag_over_two_lines_gives_a_one_line_message() {
    check_manifest(&MANIFEST.replace("{{# lines_only }}", "{{# \nlines_only }}"));
}

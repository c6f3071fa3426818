//! The schema module's tests: registration checks, violations and default filling.

use serde_json::{Value, json};

use crate::schema::is_json_schema;
use crate::schema::{InputSchema, MAX_ARGUMENTS_BYTES, MAX_ARGUMENTS_DEPTH, OutputSchema};

fn hello_schema() -> InputSchema {
    InputSchema::new(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2},
            "age": {"type": "integer", "minimum": 0},
            "color": {"enum": ["red", "green"]},
            "tags": {"type": "array", "maxItems": 1},
            "nick": {"type": ["string", "null"]}
        },
        "required": ["name"],
        "additionalProperties": false
    }))
    .unwrap()
}

/// Checks the registration of `schema` as an input schema.
fn check_schema(schema: Value, expect: Result<(), &str>) {
    let actual = InputSchema::new(schema)
        .map(|_| ())
        .map_err(|error| error.to_string());
    assert_eq!(actual, expect.map_err(str::to_owned));
}

/// Checks the violations of `arguments` against [`hello_schema`].
fn check(arguments: Value, expect: &[&str]) {
    let actual: Vec<String> = hello_schema()
        .violations(&arguments)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(actual, expect);
}

fn check_defaults(schema: Value, arguments: Value, expect: Value) {
    let schema = InputSchema::new(schema).unwrap();
    assert_eq!(schema.with_defaults(&arguments), expect);
}

#[test]
fn valid_schemas() {
    check_schema(json!({"type": "object"}), Ok(()));
    check_schema(
        json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}),
        Ok(()),
    );
    check_schema(
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
        Ok(()),
    );
}

#[test]
fn schema_not_an_object() {
    check_schema(
        json!([1]),
        Err("the schema must be a JSON object, not an array"),
    );
}

#[test]
fn root_must_be_object_type() {
    check_schema(
        json!({"properties": {}}),
        Err(
            "the schema's root must have \"type\": \"object\" (LLM APIs require it), found no type",
        ),
    );
    check_schema(
        json!({"type": "string"}),
        Err(
            "the schema's root must have \"type\": \"object\" (LLM APIs require it), found \"string\"",
        ),
    );
}

#[test]
fn root_combinators_are_refused() {
    check_schema(
        json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        Err(
            "the schema's root may not use `oneOf` (LLM APIs reject oneOf, anyOf and allOf at the top level); move it into a property",
        ),
    );
    check_schema(
        json!({"type": "object", "allOf": []}),
        Err(
            "the schema's root may not use `allOf` (LLM APIs reject oneOf, anyOf and allOf at the top level); move it into a property",
        ),
    );
}

#[test]
fn invalid_keyword_values() {
    check_schema(
        json!({"type": "object", "properties": {"a": {"type": "strnig"}}}),
        Err(
            "the schema is not valid JSON Schema: /properties/a/type: expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got \"strnig\"",
        ),
    );
    check_schema(
        json!({"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}),
        Err(
            "the schema is not valid JSON Schema: /properties/a/minLength: expected at least 0, got -1",
        ),
    );
    check_schema(
        json!({"type": "object", "required": "a"}),
        Err("the schema is not valid JSON Schema: /required: expected array, got \"a\" (a string)"),
    );
}

#[test]
fn unknown_meta_schema() {
    check_schema(
        json!({"$schema": "https://example.com/my-schema", "type": "object"}),
        Err("the schema's `$schema` is not a known JSON Schema draft"),
    );
}

#[test]
fn uncompilable_schema() {
    check_schema(
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
        Err("the schema cannot be compiled"),
    );
}

#[test]
fn missing_schema_is_any_object() {
    assert_eq!(
        InputSchema::any_object().as_json(),
        &json!({"type": "object"})
    );
    assert!(
        InputSchema::any_object()
            .violations(&json!({"x": 1}))
            .is_empty()
    );
}

#[test]
fn output_schemas_need_not_be_objects_but_must_be_valid() {
    assert!(OutputSchema::new(json!({"type": "string"})).is_ok());
    assert_eq!(
        OutputSchema::new(json!({"type": "strnig"}))
            .unwrap_err()
            .to_string(),
        "the schema is not valid JSON Schema: /type: expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got \"strnig\""
    );
}

#[test]
fn valid_arguments() {
    check(json!({"name": "Ada"}), &[]);
    check(json!({"name": "Ada", "age": 36, "nick": null}), &[]);
}

#[test]
fn missing_required() {
    check(json!({}), &["/: missing required property \"name\""]);
}

#[test]
fn wrong_type() {
    check(
        json!({"name": "Ada", "age": "x"}),
        &["/age: expected integer, got \"x\" (a string)"],
    );
    check(
        json!({"name": "Ada", "nick": 7}),
        &["/nick: expected null or string, got 7 (a number)"],
    );
    check(
        json!("Ada"),
        &["/: expected object, got \"Ada\" (a string)"],
    );
}

#[test]
fn unknown_properties_are_refused() {
    check(
        json!({"name": "Ada", "agee": 3}),
        &["/: unexpected property \"agee\" (the schema allows no others)"],
    );
}

#[test]
fn bounds_and_enums() {
    check(
        json!({"name": "A", "age": -1, "color": "blue", "tags": [1, 2]}),
        &[
            "/age: expected at least 0, got -1",
            "/color: expected one of [\"red\",\"green\"], got \"blue\"",
            "/name: expected at least 2 characters, got \"A\"",
            "/tags: expected at most 1 item, got 2",
        ],
    );
}

#[test]
fn every_violation_is_listed() {
    check(
        json!({"age": "x", "extra": true}),
        &[
            "/: unexpected property \"extra\" (the schema allows no others)",
            "/: missing required property \"name\"",
            "/age: expected integer, got \"x\" (a string)",
        ],
    );
}

#[test]
fn long_values_are_cut() {
    let long = "y".repeat(100);
    check(
        json!({"name": "Ada", "age": long}),
        &[&format!(
            "/age: expected integer, got \"{}… (a string)",
            "y".repeat(59)
        )],
    );
}

#[test]
fn top_level_defaults() {
    check_defaults(
        json!({"type": "object", "properties": {"a": {"type": "integer", "default": 1}, "b": {"type": "string"}}}),
        json!({}),
        json!({"a": 1}),
    );
    check_defaults(
        json!({"type": "object", "properties": {"a": {"type": "integer", "default": 1}}}),
        json!({"a": 5}),
        json!({"a": 5}),
    );
}

#[test]
fn explicit_null_is_not_replaced() {
    check_defaults(
        json!({"type": "object", "properties": {"a": {"default": 1}}}),
        json!({"a": null}),
        json!({"a": null}),
    );
}

#[test]
fn a_null_for_an_optional_property_that_refuses_null_is_taken_as_absent() {
    // OpenAI's strict mode sends `null` for an optional argument the model left out.
    let schema = json!({"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "greeting": {"type": "string", "default": "Hello"},
        "nick": {"type": ["string", "null"]},
        "color": {"type": "string", "enum": ["red", null]}
    }});
    check_defaults(
        schema.clone(),
        json!({"name": "Ada", "age": null, "greeting": null, "nick": null, "color": null}),
        json!({"name": "Ada", "greeting": "Hello", "nick": null, "color": null}),
    );
    // A required property keeps its null, and validation refuses it.
    check_defaults(
        schema,
        json!({"name": null}),
        json!({"name": null, "greeting": "Hello"}),
    );
}

#[test]
fn nested_defaults_only_under_present_parents() {
    let schema = json!({"type": "object", "properties": {
        "options": {"type": "object", "properties": {"depth": {"type": "integer", "default": 2}}}
    }});
    check_defaults(schema.clone(), json!({}), json!({}));
    check_defaults(
        schema,
        json!({"options": {}}),
        json!({"options": {"depth": 2}}),
    );
}

#[test]
fn object_defaults_are_filled_then_completed() {
    check_defaults(
        json!({"type": "object", "properties": {
            "options": {"type": "object", "default": {}, "properties": {"depth": {"default": 2}}}
        }}),
        json!({}),
        json!({"options": {"depth": 2}}),
    );
}

#[test]
fn no_defaults_through_arrays_or_refs() {
    check_defaults(
        json!({"type": "object",
        "$defs": {"opt": {"type": "object", "properties": {"b": {"default": 1}}}},
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"default": 1}}}},
            "via_ref": {"$ref": "#/$defs/opt"}
        }}),
        json!({"items": [{}], "via_ref": {}}),
        json!({"items": [{}], "via_ref": {}}),
    );
}

#[test]
fn non_object_arguments_are_left_alone() {
    check_defaults(
        json!({"type": "object", "properties": {"a": {"default": 1}}}),
        json!([1]),
        json!([1]),
    );
}

#[test]
fn schema_or_shorthand() {
    let check_detection = |value: Value, expect: bool| {
        assert_eq!(
            is_json_schema(value.as_object().unwrap()),
            expect,
            "{value}"
        );
    };
    check_detection(json!({"type": "object", "properties": {}}), true);
    check_detection(json!({"type": ["object"]}), true);
    check_detection(json!({"properties": {"a": {"type": "string"}}}), true);
    check_detection(json!({"path": {"type": "string", "required": true}}), false);
    check_detection(json!({"type": {"type": "string"}}), false);
    check_detection(
        json!({"properties": {"type": "object", "description": "d"}}),
        false,
    );
    check_detection(json!({}), false);
}

/// A schema nesting `levels` object properties, each called `p`.
fn nested_schema(levels: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 0..levels {
        schema = json!({"type": "object", "properties": {"p": schema}});
    }
    schema
}

#[test]
fn huge_schemas_are_refused() {
    let properties: serde_json::Map<String, Value> = (0..3000)
        .map(|index| {
            (
                format!("p{index}"),
                json!({"type": "string", "description": "x".repeat(100)}),
            )
        })
        .collect();
    let schema = json!({"type": "object", "properties": properties});
    let bytes = serde_json::to_string(&schema).unwrap().len();
    check_schema(
        schema,
        Err(&format!(
            "the schema takes {bytes} bytes of JSON, more than the limit of 262144"
        )),
    );
}

#[test]
fn deeply_nested_schemas_are_refused() {
    // Each level of properties is 2 levels of JSON (`properties`, then the property).
    check_schema(nested_schema(31), Ok(()));
    check_schema(
        nested_schema(32),
        Err("the schema nests objects and arrays deeper than the limit of 64"),
    );
}

#[test]
fn long_patterns_are_refused() {
    let pattern = "a?".repeat(600);
    check_schema(
        json!({"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}),
        Err(
            "a pattern at /properties/code/pattern is 1200 bytes long, more than the limit of 1024",
        ),
    );
    check_schema(
        json!({"type": "object", "patternProperties": {pattern.clone(): {"type": "string"}}}),
        Err("a pattern at /patternProperties is 1200 bytes long, more than the limit of 1024"),
    );
}

/// Catastrophic backtracking is bounded: `(a+)+$` runs on the linear-time engine, and a
/// pattern that needs backtracking (a backreference) gives up after
/// [`PATTERN_BACKTRACK_LIMIT`] steps, refusing the value with that reason. The time bound
/// is a hang guard, not a speed claim.
#[test]
fn catastrophic_patterns_are_bounded() {
    let started = std::time::Instant::now();
    let input = format!("{}!", "a".repeat(5000));
    for pattern in ["^(a+)+$", "^(a|aa)+$", "^(a*)*(b)\\1$", "^(?=(a+)+b)"] {
        let schema = InputSchema::new(
            json!({"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}),
        )
        .unwrap();
        let violations = schema.violations(&json!({"s": input}));
        assert_eq!(violations.len(), 1, "{pattern}: {violations:?}");
        assert!(!violations[0].message.contains('\n'), "{violations:?}");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn oversized_or_overdeep_arguments_are_refused() {
    let schema = InputSchema::any_object();
    let big = json!({"s": "x".repeat(MAX_ARGUMENTS_BYTES)});
    let violations: Vec<String> = schema
        .violations(&big)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        violations,
        [format!(
            "/: the arguments take {} bytes of JSON, more than the limit of 16777216",
            MAX_ARGUMENTS_BYTES + 8
        )]
    );
    let mut deep = json!(1);
    for _ in 0..MAX_ARGUMENTS_DEPTH {
        deep = json!([deep]);
    }
    assert!(
        schema
            .violations(&json!({"a": deep}))
            .iter()
            .any(|violation| violation.keyword == "maxDepth")
    );
    assert!(schema.violations(&json!({"a": [[1]]})).is_empty());
}

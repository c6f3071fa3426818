//! The generator's request handling under arbitrary input: no panic, no hang, and every
//! rejection is one clear line. Text that is not JSON, JSON of any shape, and requests whose
//! known fields carry values of any type; whatever is accepted must also render.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolsmith_generator::{Request, render, templates};

/// A hang guard, not a speed claim: a case takes microseconds.
const HANG_GUARD: Duration = Duration::from_secs(5);

const FIELDS: &[&str] = &[
    "name",
    "description",
    "parameters",
    "usage",
    "examples",
    "category",
    "requires_filesystem",
    "requires_network",
    "requires_subprocess",
    "timeout_seconds",
    "language",
    "implementation",
    "tests",
    "replace",
    "output_schema",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6_f64..1e6).prop_map(Value::from),
        "\\PC{0,24}".prop_map(Value::from),
        prop::sample::select(vec![
            "python",
            "bash",
            "manifest",
            "count_words",
            "custom_tool",
            "a",
            "x__y",
            "string",
            "integer",
            "object",
            "array",
            "success",
            "analysis",
            "{{ name }}",
            "{% raw %}",
            "'; rm -rf / #",
            "$(touch /tmp/x)",
            "\"\"\"",
            "\u{2028}",
        ])
        .prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A request whose keys are the schema's, with values of any shape, on top of a valid one.
fn request() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(FIELDS), json_value()), 0..5).prop_map(
        |overrides| {
            let mut request: Map<String, Value> = json!({
                "name": "count_words",
                "description": "Counts words.",
                "parameters": {"text": "The text"},
                "language": "python",
                "implementation": "return len(args['text'].split())",
                "tests": [{"input": {"text": "a b"}, "expect": {"result": 2}}],
            })
            .as_object()
            .unwrap()
            .clone();
            for (key, value) in overrides {
                request.insert(key.to_owned(), value);
            }
            Value::Object(request)
        },
    )
}

#[track_caller]
fn assert_one_line(message: &str) {
    assert!(!message.trim().is_empty(), "an empty rejection");
    assert!(
        !message.contains('\n'),
        "a rejection on several lines: {message:?}"
    );
}

fn handle(value: &Value) {
    let started = Instant::now();
    match Request::from_json(value) {
        Ok(request) => {
            let tera = templates(None).unwrap();
            let implementation = request.implementation.clone().unwrap_or_default();
            if let Err(error) = render(&tera, &request, &implementation) {
                assert_one_line(&error.to_string());
            }
        }
        Err(error) => assert_one_line(&error.to_string()),
    }
    assert!(started.elapsed() < HANG_GUARD, "{value}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_is_refused_in_one_line(text in "\\PC{0,200}") {
        if let Err(error) = Request::parse(&text) {
            assert_one_line(&error.to_string());
        }
    }

    #[test]
    fn arbitrary_json_is_handled(value in json_value()) {
        handle(&value);
    }

    #[test]
    fn requests_with_fields_of_any_shape_are_handled(value in request()) {
        handle(&value);
    }
}

//! Declared tests: the `tests` list a tool may carry (in its description JSON or manifest
//! frontmatter), parsed into [`TestCase`]s, each with the [`Expectation`] an envelope must meet.
//! The runner that calls the tool is [`crate::call::declared_tests`].

use std::fmt;

use serde_json::{Map, Value};

use crate::envelope::{Body, Envelope};
use crate::schema::json_type;

/// One declared test case: arguments and what the envelope must show.
#[derive(Debug, Clone, PartialEq)]
pub struct TestCase {
    /// The case's name, when it has one (otherwise it is called `case N`).
    pub name: Option<String>,
    /// The arguments of the call, a JSON object.
    pub input: Map<String, Value>,
    /// What the envelope must show.
    pub expect: Expectation,
}

/// What a test case expects of the envelope.
#[derive(Debug, Clone, PartialEq)]
pub enum Expectation {
    /// `"success"`: `tool_success` is true, whatever the result.
    /// A failure envelope (any `error_code`) fails the case.
    Success,
    /// `{"result": V}`: `tool_success` is true and the result equals `V` as JSON values:
    /// numbers compare by value (`212.0` meets `212`), objects without regard to key order.
    Result(Value),
    /// `{"result_contains": "text"}`: `tool_success` is true and the result contains `text`:
    /// a string result as text, any other result in its compact JSON form.
    ResultContains(String),
    /// `{"error_code": "CODE"}`: `tool_success` is false with this error code.
    ErrorCode(String),
}

/// Why a `tests` list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TestsError {
    /// `tests` is not an array.
    #[error("`tests` must be an array of cases, not {found}")]
    NotAnArray {
        /// The JSON type found.
        found: &'static str,
    },
    /// A case is not an object.
    #[error("tests[{index}] must be an object, not {found}")]
    CaseNotAnObject {
        /// The case's index.
        index: usize,
        /// The JSON type found.
        found: &'static str,
    },
    /// A case has a key no case may have.
    #[error("tests[{index}] has the unknown key `{key}` (allowed: name, input, expect)")]
    UnknownKey {
        /// The case's index.
        index: usize,
        /// The key.
        key: String,
    },
    /// A case's `name` is not a string.
    #[error("tests[{index}].name must be a string, not {found}")]
    NameNotAString {
        /// The case's index.
        index: usize,
        /// The JSON type found.
        found: &'static str,
    },
    /// A case's `input` is absent or not an object.
    #[error("tests[{index}].input must be an object of arguments, not {found}")]
    InputNotAnObject {
        /// The case's index.
        index: usize,
        /// The JSON type found (`nothing` when absent).
        found: &'static str,
    },
    /// A case's `expect` is none of the four shapes.
    #[error(
        "tests[{index}].expect must be \"success\", {{\"result\": ...}}, {{\"result_contains\": \"text\"}} or {{\"error_code\": \"CODE\"}}"
    )]
    BadExpectation {
        /// The case's index.
        index: usize,
    },
}

/// Parses a `tests` list. An absent `expect` means `"success"`.
pub fn parse_tests(value: &Value) -> Result<Vec<TestCase>, TestsError> {
    let Value::Array(cases) = value else {
        return Err(TestsError::NotAnArray {
            found: json_type(value),
        });
    };
    cases
        .iter()
        .enumerate()
        .map(|(index, case)| parse_case(index, case))
        .collect()
}

fn parse_case(index: usize, case: &Value) -> Result<TestCase, TestsError> {
    let Value::Object(object) = case else {
        return Err(TestsError::CaseNotAnObject {
            index,
            found: json_type(case),
        });
    };
    if let Some(key) = object
        .keys()
        .find(|key| !matches!(key.as_str(), "name" | "input" | "expect"))
    {
        return Err(TestsError::UnknownKey {
            index,
            key: key.clone(),
        });
    }
    let name = match object.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(other) => {
            return Err(TestsError::NameNotAString {
                index,
                found: json_type(other),
            });
        }
    };
    let input = match object.get("input") {
        Some(Value::Object(input)) => input.clone(),
        Some(other) => {
            return Err(TestsError::InputNotAnObject {
                index,
                found: json_type(other),
            });
        }
        None => {
            return Err(TestsError::InputNotAnObject {
                index,
                found: "nothing",
            });
        }
    };
    let expect = match object.get("expect") {
        None => Expectation::Success,
        Some(expect) => parse_expectation(expect).ok_or(TestsError::BadExpectation { index })?,
    };
    Ok(TestCase {
        name,
        input,
        expect,
    })
}

fn parse_expectation(value: &Value) -> Option<Expectation> {
    match value {
        Value::String(word) if word == "success" => Some(Expectation::Success),
        Value::Object(object) if object.len() == 1 => {
            let (key, value) = object.iter().next()?;
            match (key.as_str(), value) {
                ("result", value) => Some(Expectation::Result(value.clone())),
                ("result_contains", Value::String(text)) => {
                    Some(Expectation::ResultContains(text.clone()))
                }
                ("error_code", Value::String(code)) => Some(Expectation::ErrorCode(code.clone())),
                _ => None,
            }
        }
        _ => None,
    }
}

impl TestCase {
    /// The case as JSON, in the shape [`parse_tests`] reads.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        if let Some(name) = &self.name {
            object.insert("name".to_owned(), Value::from(name.clone()));
        }
        object.insert("input".to_owned(), Value::Object(self.input.clone()));
        object.insert("expect".to_owned(), self.expect.to_json());
        Value::Object(object)
    }

    /// The case's display name: its own, or `case N` (1-based) when it has none.
    pub fn display_name(&self, index: usize) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => format!("case {}", index + 1),
        }
    }
}

impl Expectation {
    /// The expectation as JSON, in the shape [`parse_tests`] reads.
    pub fn to_json(&self) -> Value {
        match self {
            Expectation::Success => Value::from("success"),
            Expectation::Result(value) => serde_json::json!({"result": value}),
            Expectation::ResultContains(text) => serde_json::json!({"result_contains": text}),
            Expectation::ErrorCode(code) => serde_json::json!({"error_code": code}),
        }
    }

    /// `None` when `envelope` meets the expectation, otherwise what differs, as one line
    /// (`expected …, got …`).
    pub fn mismatch(&self, envelope: &Envelope) -> Option<String> {
        match (self, &envelope.body) {
            (Expectation::ErrorCode(code), Body::Failure { error_code, .. })
                if error_code.as_str() == code =>
            {
                None
            }
            (Expectation::ErrorCode(code), _) => Some(format!(
                "expected error_code {code}, got {}",
                describe(envelope)
            )),
            (_, Body::Failure { .. }) => Some(format!(
                "expected {}, got {}",
                self.describe(),
                describe(envelope)
            )),
            (Expectation::Success, Body::Success { .. }) => None,
            (Expectation::Result(expected), Body::Success { result }) => {
                (!json_equal(expected, result)).then(|| {
                    format!(
                        "expected result {}, got result {}",
                        compact(expected),
                        compact(result)
                    )
                })
            }
            (Expectation::ResultContains(text), Body::Success { result }) => {
                let haystack = match result {
                    Value::String(string) => string.clone(),
                    other => compact(other),
                };
                (!haystack.contains(text.as_str())).then(|| {
                    format!(
                        "expected a result containing {text:?}, got result {}",
                        compact(result)
                    )
                })
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Expectation::Success => "success".to_owned(),
            Expectation::Result(value) => format!("result {}", compact(value)),
            Expectation::ResultContains(text) => format!("a result containing {text:?}"),
            Expectation::ErrorCode(code) => format!("error_code {code}"),
        }
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.describe())
    }
}

fn describe(envelope: &Envelope) -> String {
    match &envelope.body {
        Body::Success { result } => format!("success with result {}", compact(result)),
        Body::Failure { error, error_code } => {
            let mut text = format!("{} ({error})", error_code.as_str());
            let stderr = envelope.metadata.stderr.trim();
            if !stderr.is_empty() {
                text.push_str(&format!("; stderr: {stderr}"));
            }
            text
        }
    }
}

/// JSON equality by value: numbers are equal when they denote the same number, whatever
/// their text (`212`, `212.0` and `2.12e2` are one number; JSON has no integer type, and a
/// tool in Python or JavaScript may print either); arrays and objects compare element by
/// element.
pub(crate) fn json_equal(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(left), Value::Number(right)) => number_equal(left, right),
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len()
                && left
                    .iter()
                    .zip(right)
                    .all(|(left, right)| json_equal(left, right))
        }
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left
                    .iter()
                    .all(|(key, left)| right.get(key).is_some_and(|right| json_equal(left, right)))
        }
        (left, right) => left == right,
    }
}

/// Two numbers are equal when both are integers of the same value, or when one is a float
/// and the other denotes exactly the same value (an integer compared with a float only when
/// the float is integral, converted without loss).
fn number_equal(left: &serde_json::Number, right: &serde_json::Number) -> bool {
    match (integer(left), integer(right)) {
        (Some(left), Some(right)) => left == right,
        (Some(whole), None) | (None, Some(whole)) => {
            let float = if integer(left).is_some() { right } else { left };
            float
                .as_f64()
                .is_some_and(|float| float_is_integer(float, whole))
        }
        (None, None) => left.as_f64() == right.as_f64(),
    }
}

fn integer(number: &serde_json::Number) -> Option<i128> {
    number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
}

fn float_is_integer(float: f64, whole: i128) -> bool {
    // 2^64 bounds every integer serde_json holds; beyond it the float is no such integer.
    const BOUND: f64 = 18_446_744_073_709_551_616.0;
    float.is_finite() && float.fract() == 0.0 && float.abs() < BOUND && float as i128 == whole
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::envelope::{ErrorCode, Metadata};

    fn check(tests: Value, expect: Result<usize, &str>) {
        match (parse_tests(&tests), expect) {
            (Ok(cases), Ok(count)) => assert_eq!(cases.len(), count),
            (Err(error), Err(message)) => assert_eq!(error.to_string(), message),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn parses_the_four_shapes_and_the_default() {
        check(
            json!([
                {"input": {}},
                {"name": "a", "input": {"x": 1}, "expect": "success"},
                {"input": {}, "expect": {"result": [1, 2]}},
                {"input": {}, "expect": {"result_contains": "hi"}},
                {"input": {}, "expect": {"error_code": "INVALID_PARAMS"}},
            ]),
            Ok(5),
        );
    }

    #[test]
    fn refuses_bad_cases() {
        check(
            json!({}),
            Err("`tests` must be an array of cases, not an object"),
        );
        check(
            json!([{"input": 3}]),
            Err("tests[0].input must be an object of arguments, not a number"),
        );
        check(
            json!([{}]),
            Err("tests[0].input must be an object of arguments, not nothing"),
        );
        check(
            json!([{"input": {}, "expect": "ok"}]),
            Err(
                "tests[0].expect must be \"success\", {\"result\": ...}, {\"result_contains\": \"text\"} or {\"error_code\": \"CODE\"}",
            ),
        );
        check(
            json!([{"input": {}, "expected": "success"}]),
            Err("tests[0] has the unknown key `expected` (allowed: name, input, expect)"),
        );
    }

    fn success(result: Value) -> Envelope {
        Envelope {
            body: Body::Success { result },
            metadata: Metadata::not_started(),
        }
    }

    #[test]
    fn numbers_compare_by_value() {
        let parse = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        for (left, right) in [
            ("212", "212.0"),
            ("212", "2.12e2"),
            ("-3", "-3.0"),
            ("0", "-0.0"),
            ("18446744073709551615", "18446744073709551615"),
            ("0.5", "5e-1"),
            ("[1, {\"a\": 2}]", "[1.0, {\"a\": 2.0}]"),
        ] {
            assert!(json_equal(&parse(left), &parse(right)), "{left} = {right}");
            assert!(json_equal(&parse(right), &parse(left)), "{right} = {left}");
        }
        for (left, right) in [
            ("212", "212.5"),
            ("9007199254740993", "9007199254740992.0"),
            ("-1", "18446744073709551615"),
            ("[1]", "[1, 1]"),
            ("{\"a\": 1}", "{\"b\": 1}"),
            ("1", "true"),
        ] {
            assert!(
                !json_equal(&parse(left), &parse(right)),
                "{left} != {right}"
            );
            assert!(
                !json_equal(&parse(right), &parse(left)),
                "{right} != {left}"
            );
        }
    }

    #[test]
    fn compares_envelopes() {
        let failure = Envelope::failure(
            ErrorCode::ToolCrashed,
            "boom".to_owned(),
            Metadata::not_started(),
        );
        assert_eq!(Expectation::Success.mismatch(&success(json!(1))), None);
        assert_eq!(
            Expectation::Success.mismatch(&failure).as_deref(),
            Some("expected success, got TOOL_CRASHED (boom)")
        );
        assert_eq!(
            Expectation::Result(json!({"a": 1})).mismatch(&success(json!({"a": 2}))),
            Some("expected result {\"a\":1}, got result {\"a\":2}".to_owned())
        );
        assert_eq!(
            Expectation::Result(json!({"f": 212, "l": [1, -3]}))
                .mismatch(&success(json!({"l": [1.0, -3.0], "f": 212.0}))),
            None
        );
        assert_eq!(
            Expectation::Result(json!(212)).mismatch(&success(json!(212.5))),
            Some("expected result 212, got result 212.5".to_owned())
        );
        assert_eq!(
            Expectation::Result(json!("212")).mismatch(&success(json!(212))),
            Some("expected result \"212\", got result 212".to_owned())
        );
        assert_eq!(
            Expectation::ResultContains("ell".to_owned()).mismatch(&success(json!("hello"))),
            None
        );
        assert_eq!(
            Expectation::ResultContains("\"n\":1".to_owned()).mismatch(&success(json!({"n": 1}))),
            None
        );
        assert_eq!(
            Expectation::ErrorCode("TOOL_CRASHED".to_owned()).mismatch(&failure),
            None
        );
        assert_eq!(
            Expectation::ErrorCode("INVALID_PARAMS".to_owned())
                .mismatch(&success(json!(null)))
                .as_deref(),
            Some("expected error_code INVALID_PARAMS, got success with result null")
        );
    }
}

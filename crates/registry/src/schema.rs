//! Input schemas: the JSON Schema a tool declares for its arguments, compiled once and used to validate every call.

use std::fmt;

use serde_json::Value;

/// A tool's input schema: a JSON object schema (`"type": "object"`), checked
/// against its meta-schema and compiled when the tool is discovered.
#[derive(Clone)]
pub struct InputSchema {
    value: Value,
    validator: jsonschema::Validator,
}

/// Why a declared input schema was refused.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The schema is not a JSON object.
    #[error("input_schema must be a JSON object, not {found}")]
    NotAnObject {
        /// The JSON type that was found instead.
        found: &'static str,
    },
    /// The schema does not describe an object (`"type": "object"`), which
    /// every LLM API requires of tool parameters.
    #[error("input_schema must have \"type\": \"object\", found {found}")]
    NotObjectType {
        /// The `type` that was found, as JSON, or `no type`.
        found: String,
    },
    /// The schema is not a valid JSON Schema.
    #[error("input_schema is not a valid JSON Schema: {reason}")]
    Invalid {
        /// The compiler's explanation.
        reason: String,
    },
}

/// One way in which arguments fail their schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The JSON pointer of the failing value; empty for the arguments object itself.
    pub instance_path: String,
    /// The schema keyword that failed, e.g. `required` or `type`.
    pub keyword: String,
    /// The validator's description of the failure.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.instance_path.is_empty() {
            "/"
        } else {
            &self.instance_path
        };
        write!(
            f,
            "{} (at {path}, keyword `{}`)",
            self.message, self.keyword
        )
    }
}

impl InputSchema {
    /// Checks and compiles `value`.
    pub fn new(value: Value) -> Result<InputSchema, SchemaError> {
        let Some(object) = value.as_object() else {
            return Err(SchemaError::NotAnObject {
                found: json_type(&value),
            });
        };
        match object.get("type") {
            Some(Value::String(kind)) if kind == "object" => {}
            Some(other) => {
                return Err(SchemaError::NotObjectType {
                    found: other.to_string(),
                });
            }
            None => {
                return Err(SchemaError::NotObjectType {
                    found: "no type".to_owned(),
                });
            }
        }
        let validator =
            jsonschema::validator_for(&value).map_err(|error| SchemaError::Invalid {
                reason: error.to_string(),
            })?;
        Ok(InputSchema { value, validator })
    }

    /// The schema as the tool declared it.
    pub fn as_json(&self) -> &Value {
        &self.value
    }

    /// Every way in which `arguments` fails the schema; empty when they are valid.
    pub fn violations(&self, arguments: &Value) -> Vec<Violation> {
        violations(&self.validator, arguments)
    }
}

impl fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("InputSchema").field(&self.value).finish()
    }
}

/// The schema a tool's JSON result must meet, when the tool declares one
/// (ikigai's `returns`, or an `output_schema`). A result that fails it is
/// `INVALID_OUTPUT`.
#[derive(Clone)]
pub struct OutputSchema {
    value: Value,
    validator: jsonschema::Validator,
}

impl OutputSchema {
    /// Checks and compiles `value`, which must be a JSON object.
    pub fn new(value: Value) -> Result<OutputSchema, SchemaError> {
        if !value.is_object() {
            return Err(SchemaError::NotAnObject {
                found: json_type(&value),
            });
        }
        let validator =
            jsonschema::validator_for(&value).map_err(|error| SchemaError::Invalid {
                reason: error.to_string(),
            })?;
        Ok(OutputSchema { value, validator })
    }

    /// The schema as the tool declared it.
    pub fn as_json(&self) -> &Value {
        &self.value
    }

    /// Every way in which `result` fails the schema; empty when it is valid.
    pub fn violations(&self, result: &Value) -> Vec<Violation> {
        violations(&self.validator, result)
    }
}

impl fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OutputSchema").field(&self.value).finish()
    }
}

fn violations(validator: &jsonschema::Validator, instance: &Value) -> Vec<Violation> {
    validator
        .iter_errors(instance)
        .map(|error| Violation {
            instance_path: error.instance_path().to_string(),
            keyword: error.kind().keyword().to_owned(),
            message: error.to_string(),
        })
        .collect()
}

/// The JSON type name of `value`, for messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::InputSchema;

    fn hello_schema() -> InputSchema {
        InputSchema::new(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer"}
            },
            "required": ["name"]
        }))
        .unwrap()
    }

    fn check_schema(schema: Value, expect: Result<(), &str>) {
        let actual = InputSchema::new(schema)
            .map(|_| ())
            .map_err(|error| error.to_string());
        assert_eq!(actual, expect.map_err(str::to_owned));
    }

    fn check(arguments: Value, expect: &[&str]) {
        let actual: Vec<String> = hello_schema()
            .violations(&arguments)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(actual, expect);
    }

    #[test]
    fn valid_schema() {
        check_schema(json!({"type": "object"}), Ok(()));
    }

    #[test]
    fn schema_not_an_object() {
        check_schema(
            json!([1]),
            Err("input_schema must be a JSON object, not an array"),
        );
    }

    #[test]
    fn schema_without_object_type() {
        check_schema(
            json!({"properties": {}}),
            Err("input_schema must have \"type\": \"object\", found no type"),
        );
        check_schema(
            json!({"type": "string"}),
            Err("input_schema must have \"type\": \"object\", found \"string\""),
        );
    }

    #[test]
    fn schema_invalid() {
        let error = InputSchema::new(json!({"type": "object", "properties": {"a": {"type": 5}}}))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("input_schema is not a valid JSON Schema: "),
            "{error}"
        );
    }

    #[test]
    fn valid_arguments() {
        check(json!({"name": "Ada"}), &[]);
        check(json!({"name": "Ada", "age": 36}), &[]);
    }

    #[test]
    fn missing_required() {
        check(
            json!({}),
            &["\"name\" is a required property (at /, keyword `required`)"],
        );
    }

    #[test]
    fn wrong_type() {
        check(
            json!({"name": "Ada", "age": "old"}),
            &["\"old\" is not of type \"integer\" (at /age, keyword `type`)"],
        );
    }

    #[test]
    fn not_an_object() {
        check(
            json!("Ada"),
            &["\"Ada\" is not of type \"object\" (at /, keyword `type`)"],
        );
    }
}

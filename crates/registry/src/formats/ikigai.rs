//! The ikigai tool protocol: `tool --schema` prints `{name, description, parameters, returns}`, and the tool runs with no argument and the JSON arguments on stdin.
//!
//! `parameters` is either a JSON Schema object (it has a `type`, or schema
//! `properties`) or ikigai's per-parameter map
//! `{"path": {"type": "string", "description": "...", "required": true}}`,
//! which becomes `{"type": "object", "properties": {...}, "required": [...]}`
//! with each `required` flag moved into the `required` list.
//! `returns` is the schema of the tool's JSON result (its output schema); the
//! seed's shorthand `{"stdout": {"type": "string"}, ...}` (field names mapped
//! to schemas, no schema keyword among them) becomes an object schema with
//! those properties.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use serde_json::{Map, Value};
use toolsmith_executor::Command;

use crate::formats::annotations::{Annotations, AnnotationsError};
use crate::formats::kodelet::preview;
use crate::name::{NameError, ToolName};
use crate::sandbox::{SandboxDeclaration, SandboxDeclarationError};
use crate::schema::{InputSchema, OutputSchema, SchemaError};
use crate::schema::{is_json_schema, json_type};

/// The argument that asks a tool for its schema.
pub(crate) const SCHEMA_ARG: &str = "--schema";

/// The suffix of a file that is an ikigai tool by name: `word-stats-tool` is
/// tool `word_stats`, probed with `--schema` only.
pub(crate) const FILE_SUFFIX: &str = "-tool";

/// JSON Schema keywords whose value may be an object; a `returns` that uses
/// one of them is a schema, not the field-map shorthand.
const OBJECT_VALUED_KEYWORDS: &[&str] = &[
    "properties",
    "patternProperties",
    "additionalProperties",
    "items",
    "prefixItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "anyOf",
    "oneOf",
    "allOf",
    "$defs",
    "definitions",
    "dependentSchemas",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
    "default",
    "const",
];

/// What a tool's `--schema` command declared.
#[derive(Debug)]
pub(crate) struct ToolSchema {
    pub(crate) name: ToolName,
    pub(crate) description: String,
    pub(crate) input_schema: InputSchema,
    pub(crate) output_schema: Option<OutputSchema>,
    pub(crate) sandbox: SandboxDeclaration,
    /// `approval` and `read_only`, as a manifest declares them.
    pub(crate) annotations: Annotations,
    /// `"env_arguments": true`: the tool reads its arguments from `TOOLSMITH_ARG_*` variables.
    pub(crate) env_arguments: bool,
}

/// Why the output of `--schema` is not a usable tool schema.
#[derive(Debug, thiserror::Error)]
pub enum ToolSchemaError {
    /// The output is not JSON.
    #[error("output is not JSON (starts with {preview:?})")]
    NotJson {
        /// The first characters of the output.
        preview: String,
        /// The parser's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// The output is JSON but not an object.
    #[error("output must be a JSON object, not {found}")]
    NotAnObject {
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A required field is absent.
    #[error("field `{field}` is missing")]
    MissingField {
        /// The absent field.
        field: &'static str,
    },
    /// A field has the wrong JSON type.
    #[error("field `{field}` must be {expected}, not {found}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// The JSON type it must have.
        expected: &'static str,
        /// The JSON type it has.
        found: &'static str,
    },
    /// The declared `name` is not a valid tool name.
    #[error("field `name` is invalid")]
    InvalidName {
        /// Why.
        #[source]
        source: NameError,
    },
    /// One parameter of the per-parameter map is not an object.
    #[error("parameter `{parameter}` must be an object, not {found}")]
    ParameterNotAnObject {
        /// The parameter's name.
        parameter: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// A parameter's `required` flag is not a boolean.
    #[error("parameter `{parameter}`: `required` must be true or false, not {found}")]
    RequiredNotABoolean {
        /// The parameter's name.
        parameter: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// The (converted) `parameters` schema was refused.
    #[error("field `parameters` is invalid")]
    InvalidParameters {
        /// Why.
        #[source]
        source: SchemaError,
    },
    /// The `returns` schema was refused.
    #[error("field `returns` is invalid")]
    InvalidReturns {
        /// Why.
        #[source]
        source: SchemaError,
    },
    /// The declared `approval` or `read_only` was refused.
    #[error("the declared annotations are invalid")]
    InvalidAnnotations {
        /// Why.
        #[source]
        source: AnnotationsError,
    },
    /// The declared `sandbox` was refused.
    #[error("field `sandbox` is invalid")]
    InvalidSandbox {
        /// Why.
        #[source]
        source: SandboxDeclarationError,
    },
    /// `env_arguments` is declared for a schema with a property no variable can carry.
    #[error(
        "field `env_arguments`: property `{property}` cannot be passed in a variable; names passed out of band must match ^[A-Za-z_][A-Za-z0-9_]*$ and not end in _FILE"
    )]
    UnpassableProperty {
        /// The property.
        property: String,
    },
}

/// The command that asks the tool at `program` for its schema.
pub(crate) fn schema_command(
    program: &Path,
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> Result<Command, toolsmith_executor::Error> {
    let mut command = Command::new(program, cwd)?;
    command.arg(OsStr::new(SCHEMA_ARG)).envs(env.to_vec());
    Ok(command)
}

/// The command that runs the tool at `program`: no argument, `arguments` on stdin.
pub(crate) fn run_command(
    program: &Path,
    cwd: &Path,
    env: &[(OsString, OsString)],
    arguments: &Value,
) -> Result<Command, toolsmith_executor::Error> {
    let mut command = Command::new(program, cwd)?;
    command
        .envs(env.to_vec())
        .stdin(arguments.to_string().into_bytes());
    Ok(command)
}

/// Parses what `--schema` printed. Unknown fields are ignored.
pub(crate) fn parse_schema(stdout: &[u8]) -> Result<ToolSchema, ToolSchemaError> {
    let value: Value =
        serde_json::from_slice(stdout).map_err(|source| ToolSchemaError::NotJson {
            preview: preview(stdout),
            source,
        })?;
    let Value::Object(mut object) = value else {
        return Err(ToolSchemaError::NotAnObject {
            found: json_type(&value),
        });
    };
    let name = take_string(&mut object, "name")?;
    let name = ToolName::new(&name).map_err(|source| ToolSchemaError::InvalidName { source })?;
    let description = take_string(&mut object, "description")?;
    let input_schema = match object.remove("parameters") {
        None => InputSchema::any_object(),
        Some(Value::Object(parameters)) => InputSchema::new(parameters_schema(parameters)?)
            .map_err(|source| ToolSchemaError::InvalidParameters { source })?,
        Some(other) => {
            return Err(ToolSchemaError::WrongType {
                field: "parameters",
                expected: "an object",
                found: json_type(&other),
            });
        }
    };
    let output_schema = match object.remove("returns") {
        None => None,
        Some(Value::Object(returns)) => Some(
            OutputSchema::new(returns_schema(returns))
                .map_err(|source| ToolSchemaError::InvalidReturns { source })?,
        ),
        Some(other) => {
            return Err(ToolSchemaError::WrongType {
                field: "returns",
                expected: "an object",
                found: json_type(&other),
            });
        }
    };
    let sandbox = object
        .remove("sandbox")
        .map(|value| SandboxDeclaration::from_json(&value))
        .transpose()
        .map_err(|source| ToolSchemaError::InvalidSandbox { source })?
        .unwrap_or_default();
    let annotations = Annotations::from_executable(&mut object)
        .map_err(|source| ToolSchemaError::InvalidAnnotations { source })?;
    let env_arguments = match object.remove("env_arguments") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => flag,
        Some(other) => {
            return Err(ToolSchemaError::WrongType {
                field: "env_arguments",
                expected: "true or false",
                found: json_type(&other),
            });
        }
    };
    if env_arguments && let Some(property) = crate::oob::unpassable_property(input_schema.as_json())
    {
        return Err(ToolSchemaError::UnpassableProperty {
            property: property.to_owned(),
        });
    }
    Ok(ToolSchema {
        name,
        description,
        input_schema,
        output_schema,
        sandbox,
        annotations,
        env_arguments,
    })
}

/// `parameters` as a JSON Schema: as it is when it is one, else converted
/// from the per-parameter map.
fn parameters_schema(parameters: Map<String, Value>) -> Result<Value, ToolSchemaError> {
    if is_json_schema(&parameters) {
        return Ok(Value::Object(parameters));
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (parameter, spec) in parameters {
        let Value::Object(mut spec) = spec else {
            return Err(ToolSchemaError::ParameterNotAnObject {
                found: json_type(&spec),
                parameter,
            });
        };
        match spec.remove("required") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => required.push(Value::String(parameter.clone())),
            Some(other) => {
                return Err(ToolSchemaError::RequiredNotABoolean {
                    found: json_type(&other),
                    parameter,
                });
            }
        }
        properties.insert(parameter, Value::Object(spec));
    }
    let mut schema = Map::new();
    schema.insert("type".to_owned(), Value::String("object".to_owned()));
    schema.insert("properties".to_owned(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".to_owned(), Value::Array(required));
    }
    Ok(Value::Object(schema))
}

/// `returns` as a JSON Schema: the field-map shorthand (every value an
/// object, no key a keyword that takes one) becomes an object schema with
/// those properties; anything else is taken as a schema.
fn returns_schema(returns: Map<String, Value>) -> Value {
    let is_shorthand = !returns.is_empty()
        && !is_json_schema(&returns)
        && returns.iter().all(|(key, value)| {
            value.is_object() && key != "type" && !OBJECT_VALUED_KEYWORDS.contains(&key.as_str())
        });
    if !is_shorthand {
        return Value::Object(returns);
    }
    let mut schema = Map::new();
    schema.insert("type".to_owned(), Value::String("object".to_owned()));
    schema.insert("properties".to_owned(), Value::Object(returns));
    Value::Object(schema)
}

fn take_string(
    object: &mut Map<String, Value>,
    field: &'static str,
) -> Result<String, ToolSchemaError> {
    match object.remove(field) {
        Some(Value::String(text)) => Ok(text),
        Some(other) => Err(ToolSchemaError::WrongType {
            field,
            expected: "a string",
            found: json_type(&other),
        }),
        None => Err(ToolSchemaError::MissingField { field }),
    }
}

#[cfg(test)]
mod tests {
    use crate::message::error_chain;

    use serde_json::{Value, json};

    use crate::formats::ikigai::parse_schema;

    /// Parses `stdout` and renders the tool's name, input schema and output
    /// schema, or the error with its whole source chain.
    fn check(stdout: Value, expect: Result<(&str, Value, Option<Value>), &str>) {
        let actual = parse_schema(stdout.to_string().as_bytes())
            .map(|schema| {
                (
                    schema.name.as_str().to_owned(),
                    schema.input_schema.as_json().clone(),
                    schema
                        .output_schema
                        .map(|output_schema| output_schema.as_json().clone()),
                )
            })
            .map_err(|error| error_chain(&error));
        let expect = expect
            .map(|(name, input, output)| (name.to_owned(), input, output))
            .map_err(str::to_owned);
        assert_eq!(actual, expect);
    }

    #[test]
    fn seed_example_per_parameter_required() {
        check(
            json!({
                "name": "tool_name",
                "description": "Brief description of what this tool does",
                "parameters": {
                    "param1": {"type": "string", "description": "Parameter description", "required": true},
                    "param2": {"type": "integer", "required": false},
                    "param3": {"type": "boolean"}
                },
                "returns": {"type": "object", "properties": {"field1": {"type": "string", "description": "..."}}}
            }),
            Ok((
                "tool_name",
                json!({
                    "type": "object",
                    "properties": {
                        "param1": {"type": "string", "description": "Parameter description"},
                        "param2": {"type": "integer"},
                        "param3": {"type": "boolean"}
                    },
                    "required": ["param1"]
                }),
                Some(
                    json!({"type": "object", "properties": {"field1": {"type": "string", "description": "..."}}}),
                ),
            )),
        );
    }

    #[test]
    fn full_json_schema_parameters_are_kept() {
        let schema =
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
        check(
            json!({"name": "db-query", "description": "d", "parameters": schema.clone()}),
            Ok(("db_query", schema, None)),
        );
    }

    #[test]
    fn env_arguments() {
        let declared = |value: Value| {
            parse_schema(value.to_string().as_bytes()).map(|schema| schema.env_arguments)
        };
        assert!(!declared(json!({"name": "a", "description": "d"})).unwrap());
        assert!(declared(json!({"name": "a", "description": "d", "env_arguments": true})).unwrap());
        assert_eq!(
            declared(json!({"name": "a", "description": "d", "env_arguments": 1}))
                .unwrap_err()
                .to_string(),
            "field `env_arguments` must be true or false, not a number"
        );
        assert_eq!(
            declared(json!({"name": "a", "description": "d", "env_arguments": true, "parameters": {"a.b": {"type": "string"}}}))
                .unwrap_err()
                .to_string(),
            "field `env_arguments`: property `a.b` cannot be passed in a variable; names passed out of band must match ^[A-Za-z_][A-Za-z0-9_]*$ and not end in _FILE"
        );
    }

    #[test]
    fn a_parameter_may_be_called_type() {
        check(
            json!({"name": "a", "description": "d", "parameters": {"type": {"type": "string", "required": true}}}),
            Ok((
                "a",
                json!({"type": "object", "properties": {"type": {"type": "string"}}, "required": ["type"]}),
                None,
            )),
        );
    }

    #[test]
    fn absent_parameters_take_any_object() {
        check(
            json!({"name": "a", "description": "d"}),
            Ok(("a", json!({"type": "object"}), None)),
        );
        check(
            json!({"name": "a", "description": "d", "parameters": {}}),
            Ok(("a", json!({"type": "object", "properties": {}}), None)),
        );
    }

    #[test]
    fn returns_field_map_shorthand() {
        check(
            json!({"name": "a", "description": "d", "returns": {"stdout": {"type": "string"}, "exit_code": {"type": "integer"}}}),
            Ok((
                "a",
                json!({"type": "object"}),
                Some(
                    json!({"type": "object", "properties": {"stdout": {"type": "string"}, "exit_code": {"type": "integer"}}}),
                ),
            )),
        );
        check(
            json!({"name": "a", "description": "d", "returns": {"not": {"type": "string"}}}),
            Ok((
                "a",
                json!({"type": "object"}),
                Some(json!({"not": {"type": "string"}})),
            )),
        );
    }

    #[test]
    fn bad_parameters() {
        check(
            json!({"name": "a", "description": "d", "parameters": {"p": "string"}}),
            Err("parameter `p` must be an object, not a string"),
        );
        check(
            json!({"name": "a", "description": "d", "parameters": {"p": {"type": "string", "required": "yes"}}}),
            Err("parameter `p`: `required` must be true or false, not a string"),
        );
        check(
            json!({"name": "a", "description": "d", "parameters": {"p": {"type": "strnig"}}}),
            Err(
                "field `parameters` is invalid: the schema is not valid JSON Schema: /properties/p/type: expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got \"strnig\"",
            ),
        );
        check(
            json!({"name": "a", "description": "d", "parameters": {"type": "string"}}),
            Err(
                "field `parameters` is invalid: the schema's root must have \"type\": \"object\" (LLM APIs require it), found \"string\"",
            ),
        );
        check(
            json!({"name": "a", "description": "d", "parameters": [1]}),
            Err("field `parameters` must be an object, not an array"),
        );
    }

    #[test]
    fn bad_returns() {
        check(
            json!({"name": "a", "description": "d", "returns": "string"}),
            Err("field `returns` must be an object, not a string"),
        );
        check(
            json!({"name": "a", "description": "d", "returns": {"type": "strnig"}}),
            Err(
                "field `returns` is invalid: the schema is not valid JSON Schema: /type: expected a JSON Schema type name (array, boolean, integer, null, number, object or string), got \"strnig\"",
            ),
        );
    }

    #[test]
    fn missing_fields() {
        check(json!({"description": "d"}), Err("field `name` is missing"));
        check(json!({"name": "a"}), Err("field `description` is missing"));
        check(
            json!({"name": "A", "description": "d"}),
            Err("field `name` is invalid: tool name `A` must start with a lowercase letter"),
        );
        check(
            json!([1]),
            Err("output must be a JSON object, not an array"),
        );
    }

    #[test]
    fn not_json() {
        let error = parse_schema(b"usage: tool [--schema]").unwrap_err();
        assert_eq!(
            error.to_string(),
            "output is not JSON (starts with \"usage: tool [--schema]\")"
        );
    }
}

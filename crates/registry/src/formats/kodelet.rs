//! The Kodelet tool protocol: `tool description` prints the tool's metadata as JSON, `tool config` optionally asks for a timeout, `tool run` reads the arguments on stdin.

pub(crate) mod go_duration;

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use toolsmith_executor::Command;

use crate::formats::annotations::{Annotations, AnnotationsError};
use crate::formats::declared_tests::{TestCase, TestsError, parse_tests};
use crate::formats::kodelet::go_duration::{DurationError, parse_go_duration};
use crate::name::{NameError, ToolName};
use crate::sandbox::{SandboxDeclaration, SandboxDeclarationError};
use crate::schema::json_type;
use crate::schema::{InputSchema, OutputSchema, SchemaError};

/// The argument that asks a tool for its description.
pub(crate) const DESCRIPTION_ARG: &str = "description";

/// The argument that asks a tool for its optional configuration.
pub(crate) const CONFIG_ARG: &str = "config";

/// The argument that runs a tool.
const RUN_ARG: &str = "run";

/// What a tool's `description` command declared.
#[derive(Debug)]
pub(crate) struct Description {
    pub(crate) name: ToolName,
    pub(crate) description: String,
    pub(crate) input_schema: InputSchema,
    pub(crate) output_schema: Option<OutputSchema>,
    pub(crate) sandbox: SandboxDeclaration,
    /// `approval` and `read_only`, as a manifest declares them.
    pub(crate) annotations: Annotations,
    pub(crate) tests: Vec<TestCase>,
    /// `"env_arguments": true`: the tool reads its arguments from `TOOLSMITH_ARG_*` variables.
    pub(crate) env_arguments: bool,
}

/// Why the output of `description` is not a usable description.
#[derive(Debug, thiserror::Error)]
pub enum DescriptionError {
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
    /// The declared `input_schema` was refused.
    #[error("field `input_schema` is invalid")]
    InvalidSchema {
        /// Why.
        #[source]
        source: SchemaError,
    },
    /// The declared `output_schema` was refused.
    #[error("field `output_schema` is invalid")]
    InvalidOutputSchema {
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
    /// The declared `tests` were refused.
    #[error("field `tests` is invalid")]
    InvalidTests {
        /// Why.
        #[source]
        source: TestsError,
    },
}

impl DescriptionError {
    /// True when the output is a Kodelet description with a mistake in it (a
    /// JSON object with a `name`), so the mistake is the tool's whole story.
    /// False when the tool does not seem to speak the protocol at all, and
    /// another protocol is worth a try.
    pub(crate) fn is_kodelet_answer(&self) -> bool {
        match self {
            DescriptionError::NotJson { .. } | DescriptionError::NotAnObject { .. } => false,
            DescriptionError::MissingField { field } => *field != "name",
            DescriptionError::WrongType { .. }
            | DescriptionError::InvalidName { .. }
            | DescriptionError::InvalidSchema { .. }
            | DescriptionError::InvalidOutputSchema { .. }
            | DescriptionError::InvalidSandbox { .. }
            | DescriptionError::InvalidAnnotations { .. }
            | DescriptionError::UnpassableProperty { .. }
            | DescriptionError::InvalidTests { .. } => true,
        }
    }
}

/// Why the output of `config` was refused. Only a `timeout` the tool clearly
/// meant to set is checked: a tool that does not implement `config` is fine.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `timeout` is not a string.
    #[error("field `timeout` must be a Go duration string such as \"30s\" or \"5m\", not {found}")]
    TimeoutNotAString {
        /// The JSON type found.
        found: &'static str,
    },
    /// `timeout` is a string but not a positive Go duration.
    #[error("field `timeout` is invalid")]
    InvalidTimeout {
        /// Why.
        #[source]
        source: DurationError,
    },
}

/// The command that asks the tool at `program` to describe itself.
pub(crate) fn description_command(
    program: &Path,
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> Result<Command, toolsmith_executor::Error> {
    let mut command = Command::new(program, cwd)?;
    command.arg(OsStr::new(DESCRIPTION_ARG)).envs(env.to_vec());
    Ok(command)
}

/// The command that asks the tool at `program` for its configuration.
pub(crate) fn config_command(
    program: &Path,
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> Result<Command, toolsmith_executor::Error> {
    let mut command = Command::new(program, cwd)?;
    command.arg(OsStr::new(CONFIG_ARG)).envs(env.to_vec());
    Ok(command)
}

/// The timeout a tool's `config` output asks for, e.g. `{"timeout": "30m"}`.
///
/// Output that is not a JSON object, or an object without `timeout` (or with
/// `"timeout": null`), asks for nothing: tools need not implement `config`,
/// and one that answers it with a usage message or its normal output must
/// still load. Other fields are ignored.
pub(crate) fn parse_config(stdout: &[u8]) -> Result<Option<Duration>, ConfigError> {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(stdout) else {
        return Ok(None);
    };
    match object.get("timeout") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => parse_go_duration(text)
            .map(Some)
            .map_err(|source| ConfigError::InvalidTimeout { source }),
        Some(other) => Err(ConfigError::TimeoutNotAString {
            found: json_type(other),
        }),
    }
}

/// The command that runs the tool at `program` with `arguments` on stdin.
pub(crate) fn run_command(
    program: &Path,
    cwd: &Path,
    env: &[(OsString, OsString)],
    arguments: &Value,
) -> Result<Command, toolsmith_executor::Error> {
    let mut command = Command::new(program, cwd)?;
    command
        .arg(OsStr::new(RUN_ARG))
        .envs(env.to_vec())
        .stdin(arguments.to_string().into_bytes());
    Ok(command)
}

/// Parses what `description` printed.
///
/// Fields other than `name`, `description`, `input_schema` and the optional
/// `output_schema` are ignored, so
/// that tools written for Kodelet with extra metadata still load.
/// An absent (or `null`) `input_schema` means the tool takes any object,
/// as Kodelet treats it.
pub(crate) fn parse_description(stdout: &[u8]) -> Result<Description, DescriptionError> {
    let value: Value =
        serde_json::from_slice(stdout).map_err(|source| DescriptionError::NotJson {
            preview: preview(stdout),
            source,
        })?;
    let Value::Object(mut object) = value else {
        return Err(DescriptionError::NotAnObject {
            found: json_type(&value),
        });
    };
    let name = take_string(&mut object, "name")?;
    let name = ToolName::new(&name).map_err(|source| DescriptionError::InvalidName { source })?;
    let description = take_string(&mut object, "description")?;
    let input_schema = match object.remove("input_schema") {
        None | Some(Value::Null) => InputSchema::any_object(),
        Some(schema) => {
            InputSchema::new(schema).map_err(|source| DescriptionError::InvalidSchema { source })?
        }
    };
    let output_schema = object
        .remove("output_schema")
        .map(OutputSchema::new)
        .transpose()
        .map_err(|source| DescriptionError::InvalidOutputSchema { source })?;
    let sandbox = object
        .remove("sandbox")
        .map(|value| SandboxDeclaration::from_json(&value))
        .transpose()
        .map_err(|source| DescriptionError::InvalidSandbox { source })?
        .unwrap_or_default();
    let tests = match object.remove("tests") {
        None | Some(Value::Null) => Vec::new(),
        Some(tests) => {
            parse_tests(&tests).map_err(|source| DescriptionError::InvalidTests { source })?
        }
    };
    let annotations = Annotations::from_executable(&mut object)
        .map_err(|source| DescriptionError::InvalidAnnotations { source })?;
    let env_arguments = match object.remove("env_arguments") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => flag,
        Some(other) => {
            return Err(DescriptionError::WrongType {
                field: "env_arguments",
                expected: "true or false",
                found: json_type(&other),
            });
        }
    };
    if env_arguments && let Some(property) = crate::oob::unpassable_property(input_schema.as_json())
    {
        return Err(DescriptionError::UnpassableProperty {
            property: property.to_owned(),
        });
    }
    Ok(Description {
        name,
        description,
        input_schema,
        output_schema,
        sandbox,
        annotations,
        tests,
        env_arguments,
    })
}

fn take_string(
    object: &mut serde_json::Map<String, Value>,
    field: &'static str,
) -> Result<String, DescriptionError> {
    match object.remove(field) {
        Some(Value::String(text)) => Ok(text),
        Some(other) => Err(DescriptionError::WrongType {
            field,
            expected: "a string",
            found: json_type(&other),
        }),
        None => Err(DescriptionError::MissingField { field }),
    }
}

/// The first 40 characters of `bytes` as lossy text, for messages.
pub(crate) fn preview(bytes: &[u8]) -> String {
    const PREVIEW_CHARS: usize = 40;
    let text = String::from_utf8_lossy(bytes);
    let mut preview: String = text.trim().chars().take(PREVIEW_CHARS).collect();
    if text.trim().chars().count() > PREVIEW_CHARS {
        preview.push('…');
    }
    preview
}

#[cfg(test)]
mod tests {
    use crate::message::error_chain;

    use std::time::Duration;

    use crate::formats::kodelet::{parse_config, parse_description};

    /// Renders the error with its whole source chain, as the CLI does.
    fn check(stdout: &str, expect: Result<(&str, &str), &str>) {
        let actual = parse_description(stdout.as_bytes())
            .map(|description| {
                (
                    description.name.as_str().to_owned(),
                    description.description,
                )
            })
            .map_err(|error| error_chain(&error));
        let expect = expect
            .map(|(name, description)| (name.to_owned(), description.to_owned()))
            .map_err(str::to_owned);
        assert_eq!(actual, expect);
    }

    #[test]
    fn kodelet_hello() {
        check(
            r#"{"name": "hello", "description": "Say hello", "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}"#,
            Ok(("hello", "Say hello")),
        );
    }

    #[test]
    fn extra_fields_are_ignored() {
        check(
            r#"{"name": "a", "description": "d", "input_schema": {"type": "object"}, "version": 2}"#,
            Ok(("a", "d")),
        );
    }

    #[test]
    fn garbage() {
        check(
            "this is not json\n",
            Err(
                "output is not JSON (starts with \"this is not json\"): expected ident at line 1 column 2",
            ),
        );
    }

    #[test]
    fn empty_output() {
        check(
            "",
            Err(
                "output is not JSON (starts with \"\"): EOF while parsing a value at line 1 column 0",
            ),
        );
    }

    #[test]
    fn not_an_object() {
        check("[1, 2]", Err("output must be a JSON object, not an array"));
    }

    #[test]
    fn missing_name() {
        check(
            r#"{"description": "d", "input_schema": {"type": "object"}}"#,
            Err("field `name` is missing"),
        );
    }

    #[test]
    fn env_arguments() {
        let declared = |text: &str| parse_description(text.as_bytes()).map(|d| d.env_arguments);
        assert!(!declared(r#"{"name": "a", "description": "d"}"#).unwrap());
        assert!(declared(r#"{"name": "a", "description": "d", "env_arguments": true}"#).unwrap());
        check(
            r#"{"name": "a", "description": "d", "env_arguments": "yes"}"#,
            Err("field `env_arguments` must be true or false, not a string"),
        );
        check(
            r#"{"name": "a", "description": "d", "env_arguments": true, "input_schema": {"type": "object", "properties": {"ok": {}, "my-path": {}}}}"#,
            Err(
                "field `env_arguments`: property `my-path` cannot be passed in a variable; names passed out of band must match ^[A-Za-z_][A-Za-z0-9_]*$ and not end in _FILE",
            ),
        );
        check(
            r#"{"name": "a", "description": "d", "env_arguments": true, "input_schema": {"type": "object", "properties": {"x_FILE": {}}}}"#,
            Err(
                "field `env_arguments`: property `x_FILE` cannot be passed in a variable; names passed out of band must match ^[A-Za-z_][A-Za-z0-9_]*$ and not end in _FILE",
            ),
        );
    }

    #[test]
    fn name_not_a_string() {
        check(
            r#"{"name": 7, "description": "d", "input_schema": {"type": "object"}}"#,
            Err("field `name` must be a string, not a number"),
        );
    }

    #[test]
    fn invalid_name() {
        check(
            r#"{"name": "Hello", "description": "d", "input_schema": {"type": "object"}}"#,
            Err("field `name` is invalid: tool name `Hello` must start with a lowercase letter"),
        );
    }

    #[test]
    fn missing_description() {
        check(
            r#"{"name": "a", "input_schema": {"type": "object"}}"#,
            Err("field `description` is missing"),
        );
    }

    #[test]
    fn missing_schema_takes_any_object() {
        check(r#"{"name": "a", "description": "d"}"#, Ok(("a", "d")));
        check(
            r#"{"name": "a", "description": "d", "input_schema": null}"#,
            Ok(("a", "d")),
        );
        let description = parse_description(br#"{"name": "a", "description": "d"}"#).unwrap();
        assert_eq!(
            description.input_schema.as_json(),
            &serde_json::json!({"type": "object"})
        );
    }

    #[test]
    fn schema_with_root_combinator() {
        check(
            r#"{"name": "a", "description": "d", "input_schema": {"type": "object", "anyOf": [{"required": ["x"]}]}}"#,
            Err(
                "field `input_schema` is invalid: the schema's root may not use `anyOf` (LLM APIs reject oneOf, anyOf and allOf at the top level); move it into a property",
            ),
        );
    }

    fn check_config(stdout: &str, expect: Result<Option<Duration>, &str>) {
        let actual = parse_config(stdout.as_bytes()).map_err(|error| error_chain(&error));
        assert_eq!(actual, expect.map_err(str::to_owned), "{stdout:?}");
    }

    #[test]
    fn config_timeout() {
        check_config(r#"{"timeout": "30m"}"#, Ok(Some(Duration::from_secs(1800))));
        check_config(
            r#"{"timeout": "1h30m", "other": 1}"#,
            Ok(Some(Duration::from_secs(5400))),
        );
    }

    #[test]
    fn config_not_implemented_asks_for_nothing() {
        check_config("", Ok(None));
        check_config("Unknown command: config\n", Ok(None));
        check_config("[1]", Ok(None));
        check_config("{}", Ok(None));
        check_config(r#"{"timeout": null}"#, Ok(None));
    }

    #[test]
    fn config_invalid_timeout() {
        check_config(
            r#"{"timeout": 30}"#,
            Err(
                "field `timeout` must be a Go duration string such as \"30s\" or \"5m\", not a number",
            ),
        );
        check_config(
            r#"{"timeout": "soon"}"#,
            Err(
                "field `timeout` is invalid: `soon` is not a duration such as `30s`, `5m` or `1h30m`",
            ),
        );
        check_config(
            r#"{"timeout": "0s"}"#,
            Err("field `timeout` is invalid: `0s` is not a positive duration"),
        );
    }

    #[test]
    fn schema_not_object_type() {
        check(
            r#"{"name": "a", "description": "d", "input_schema": {"type": "array"}}"#,
            Err(
                "field `input_schema` is invalid: the schema's root must have \"type\": \"object\" (LLM APIs require it), found \"array\"",
            ),
        );
    }
}

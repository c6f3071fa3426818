//! `custom_tool` requests: the published JSON Schema, and the checked [`Request`] built from a JSON value that meets it.

use std::fmt;
use std::sync::LazyLock;

use serde_json::{Map, Value};
use toolsmith_registry::{
    InputSchema, NameError, NetworkSetting, SandboxDeclaration, SandboxDeclarationError, TestCase,
    TestsError, ToolName, error_chain, parse_tests,
};

/// The published JSON Schema of a request, as text (`toolsmith generate --print-schema`).
pub const REQUEST_SCHEMA: &str = include_str!("request.schema.json");

static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(REQUEST_SCHEMA).expect("the embedded request schema is valid JSON")
});

static VALIDATOR: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    jsonschema::validator_for(&SCHEMA).expect("the embedded request schema is a valid JSON Schema")
});

/// The request schema as JSON (the input schema of the `custom_tool` MCP tool).
pub fn request_schema() -> &'static Value {
    &SCHEMA
}

/// The language a tool is generated in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// A Python 3 Kodelet tool; `implementation` is the body of `def run(args: dict)`.
    Python,
    /// A bash Kodelet tool; `implementation` is a fragment reading `ARG_<NAME>`.
    Bash,
    /// A Nanocoder manifest; `implementation` is the shell body with `{{ name }}` tags.
    Manifest,
}

impl Language {
    /// All languages, in the schema's order.
    pub const ALL: [Language; 3] = [Language::Python, Language::Bash, Language::Manifest];

    /// The language's name in requests.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Bash => "bash",
            Language::Manifest => "manifest",
        }
    }

    /// Parses a language name.
    pub fn parse(text: &str) -> Option<Language> {
        Language::ALL
            .into_iter()
            .find(|language| language.as_str() == text)
    }

    /// The name of the tool's file for `name`.
    pub fn file_name(self, name: &ToolName) -> String {
        match self {
            Language::Python | Language::Bash => name.as_str().to_owned(),
            Language::Manifest => format!("{}.md", name.as_str()),
        }
    }

    /// The template that renders this language, in `templates/`.
    pub fn template(self) -> &'static str {
        match self {
            Language::Python => "python.tera",
            Language::Bash => "bash.tera",
            Language::Manifest => "manifest.tera",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// One parameter of the requested tool, in declaration order.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    /// The parameter's name (`^[a-z][a-z0-9_]*$`).
    pub name: String,
    /// Its JSON type: string, number, integer, boolean, array or object.
    pub kind: String,
    /// Whether a call must give it.
    pub required: bool,
    /// Its JSON Schema (type, description, bounds, enum, default, items).
    pub schema: Map<String, Value>,
}

/// A checked `custom_tool` request.
#[derive(Debug, Clone)]
pub struct Request {
    /// The tool's name.
    pub name: ToolName,
    /// What it does.
    pub description: String,
    /// Its parameters.
    pub parameters: Vec<Parameter>,
    /// When to use it.
    pub usage: Option<String>,
    /// Example calls.
    pub examples: Vec<String>,
    /// The seed's category.
    pub category: String,
    /// It writes files.
    pub requires_filesystem: bool,
    /// It needs the network.
    pub requires_network: bool,
    /// Its own `sandbox` declaration, when the request gives one (checked with
    /// [`SandboxDeclaration::from_json`]); it replaces what the two flags above declare.
    pub declared_sandbox: Option<SandboxDeclaration>,
    /// It runs other programs.
    pub requires_subprocess: bool,
    /// The timeout of one call, 1..=300 seconds.
    pub timeout_seconds: u64,
    /// The language of `implementation`.
    pub language: Language,
    /// The logic; `None` scaffolds a draft.
    pub implementation: Option<String>,
    /// The schema the result must meet, if any.
    pub output_schema: Option<Value>,
    /// The test cases.
    pub tests: Vec<TestCase>,
    /// Replace an existing tool of the same name.
    pub replace: bool,
    /// The declaration learned from the tests (see [`Toolsmith::learn_cases`](toolsmith_registry::Toolsmith::learn_cases)),
    /// which the registered file carries in place of the one `requires_network` and
    /// `requires_filesystem` suggest; `None` until the staged tool's tests were learned from.
    pub learned: Option<SandboxDeclaration>,
}

/// Why a request was refused before anything was rendered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The request is not valid JSON.
    #[error("the request is not JSON: {message}")]
    NotJson {
        /// The parser's message.
        message: String,
    },
    /// The request does not meet the published schema.
    #[error("the request does not meet the request schema: {}", violations.join("; "))]
    Schema {
        /// Each violation, with its JSON path.
        violations: Vec<String>,
    },
    /// The name is not a valid tool name (e.g. reserved).
    #[error("invalid name")]
    Name {
        /// Why.
        #[source]
        source: NameError,
    },
    /// A parameter type the language cannot take.
    #[error("parameter `{parameter}`: the {language} language has no `{kind}` parameters")]
    UnsupportedType {
        /// The parameter.
        parameter: String,
        /// Its type.
        kind: String,
        /// The language.
        language: Language,
    },
    /// The parameters make an invalid JSON Schema (e.g. a bad pattern).
    #[error("the parameters do not make a valid JSON Schema: {message}")]
    ParameterSchema {
        /// Why.
        message: String,
    },
    /// The `sandbox` declaration was refused.
    #[error("invalid sandbox declaration")]
    Sandbox {
        /// Why.
        #[source]
        source: SandboxDeclarationError,
    },
    /// The `tests` were refused.
    #[error("invalid tests")]
    Tests {
        /// Why.
        #[source]
        source: TestsError,
    },
}

impl Request {
    /// Parses request text (JSON).
    pub fn parse(text: &str) -> Result<Request, RequestError> {
        let value: Value = serde_json::from_str(text).map_err(|error| RequestError::NotJson {
            message: error.to_string(),
        })?;
        Request::from_json(&value)
    }

    /// Checks `value` against the request schema and builds the request.
    pub fn from_json(value: &Value) -> Result<Request, RequestError> {
        let violations: Vec<String> = VALIDATOR
            .iter_errors(value)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!("{path}: {error}")
                }
            })
            .collect();
        if !violations.is_empty() {
            return Err(RequestError::Schema { violations });
        }
        let object = value.as_object().cloned().unwrap_or_default();
        let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
        let flag = |key: &str| object.get(key).and_then(Value::as_bool).unwrap_or(false);
        let name = ToolName::new(&text("name").unwrap_or_default())
            .map_err(|source| RequestError::Name { source })?;
        let language = text("language")
            .as_deref()
            .and_then(Language::parse)
            .unwrap_or(Language::Python);
        let parameters = match object.get("parameters") {
            Some(Value::Object(declared)) => declared
                .iter()
                .map(|(name, spec)| parameter(name, spec, language))
                .collect::<Result<Vec<_>, _>>()?,
            _ => Vec::new(),
        };
        let tests = match object.get("tests") {
            Some(tests) => parse_tests(tests).map_err(|source| RequestError::Tests { source })?,
            None => Vec::new(),
        };
        let request = Request {
            name,
            description: text("description").unwrap_or_default(),
            parameters,
            usage: text("usage"),
            examples: object
                .get("examples")
                .and_then(Value::as_array)
                .map(|examples| {
                    examples
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            category: text("category").unwrap_or_else(|| "utility".to_owned()),
            requires_filesystem: flag("requires_filesystem"),
            requires_network: flag("requires_network"),
            declared_sandbox: object
                .get("sandbox")
                .map(SandboxDeclaration::from_json)
                .transpose()
                .map_err(|source| RequestError::Sandbox { source })?,
            requires_subprocess: flag("requires_subprocess"),
            timeout_seconds: object
                .get("timeout_seconds")
                .and_then(Value::as_u64)
                .unwrap_or(30),
            language,
            implementation: text("implementation"),
            output_schema: object.get("output_schema").cloned(),
            tests,
            replace: flag("replace"),
            learned: None,
        };
        InputSchema::new(request.input_schema()).map_err(|source| {
            RequestError::ParameterSchema {
                message: error_chain(&source),
            }
        })?;
        Ok(request)
    }

    /// The JSON Schema of the tool's arguments, exactly as the registry will read it back
    /// from the generated tool.
    pub fn input_schema(&self) -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for parameter in &self.parameters {
            properties.insert(
                parameter.name.clone(),
                Value::Object(parameter.schema.clone()),
            );
            if parameter.required {
                required.push(Value::from(parameter.name.clone()));
            }
        }
        let mut schema = Map::new();
        schema.insert("type".to_owned(), Value::from("object"));
        schema.insert("properties".to_owned(), Value::Object(properties));
        if !required.is_empty() {
            schema.insert("required".to_owned(), Value::Array(required));
        }
        Value::Object(schema)
    }

    /// The description the LLM reads: the request's description, then its usage and
    /// examples, each verbatim, without trailing whitespace (which the registry drops
    /// from manifests).
    pub fn full_description(&self) -> String {
        let mut text = self.description.clone();
        if let Some(usage) = &self.usage {
            text.push_str("\n\nUsage: ");
            text.push_str(usage);
        }
        if !self.examples.is_empty() {
            text.push_str("\n\nExamples:");
            for example in &self.examples {
                text.push_str("\n- ");
                text.push_str(example);
            }
        }
        text.truncate(text.trim_end().len());
        text
    }

    /// The sandbox the tool declares: the learned declaration once there is one; before,
    /// network denied unless it needs it, the filesystem read-only unless it writes files
    /// (then the project).
    pub fn sandbox(&self) -> Value {
        if let Some(learned) = &self.learned {
            return learned.to_json();
        }
        if let Some(declared) = &self.declared_sandbox {
            return declared.to_json();
        }
        serde_json::json!({
            "network": if self.requires_network { "allow" } else { "deny" },
            "filesystem": if self.requires_filesystem { "project" } else { "read-only" },
        })
    }

    /// True when the tool asks for the whole network (`requires_network`, or a declared
    /// `"any"`); a destination list runs in a namespace whose only way out is the proxy.
    pub fn wants_network(&self) -> bool {
        match &self.declared_sandbox {
            Some(declared) => matches!(declared.network, Some(NetworkSetting::Allow)),
            None => self.requires_network,
        }
    }
}

/// Builds one parameter from its plain description or its full specification. The
/// schema's keys follow the registry's manifest loader so that the schema read back
/// from any generated tool equals the request's.
fn parameter(name: &str, spec: &Value, language: Language) -> Result<Parameter, RequestError> {
    let mut schema = Map::new();
    let Value::Object(spec) = spec else {
        schema.insert("type".to_owned(), Value::from("string"));
        schema.insert("description".to_owned(), spec.clone());
        return Ok(Parameter {
            name: name.to_owned(),
            kind: "string".to_owned(),
            required: true,
            schema,
        });
    };
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string")
        .to_owned();
    if language == Language::Manifest && kind == "object" {
        return Err(RequestError::UnsupportedType {
            parameter: name.to_owned(),
            kind,
            language,
        });
    }
    schema.insert("type".to_owned(), Value::from(kind.clone()));
    for key in [
        "description",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "enum",
    ] {
        if let Some(value) = spec.get(key) {
            schema.insert(key.to_owned(), value.clone());
        }
    }
    if kind == "array" {
        let items = spec
            .get("items")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": ["string", "number", "boolean"]}));
        schema.insert("items".to_owned(), items);
    }
    if let Some(default) = spec.get("default") {
        schema.insert("default".to_owned(), default.clone());
    }
    Ok(Parameter {
        name: name.to_owned(),
        kind,
        required: spec
            .get("required")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        schema,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_request_declares_its_sandbox_in_the_words_of_every_tool() {
        let request = Request::from_json(&json!({
            "name": "fetch_page", "description": "Fetches a page.",
            "sandbox": {"network": ["a.test:80"], "filesystem": "read-only"},
        }))
        .unwrap();
        assert_eq!(
            request.sandbox(),
            json!({"network": ["a.test:80"], "filesystem": "read-only"})
        );
        assert!(!request.wants_network());
        let refused = Request::from_json(&json!({
            "name": "fetch_page", "description": "Fetches a page.",
            "sandbox": {"network": ["http://a.test"]},
        }))
        .unwrap_err();
        assert_eq!(
            error_chain(&refused),
            "invalid sandbox declaration: `sandbox.network` must be one of \"none\", \"any\" (or \"deny\", \"allow\"), a list of destinations, not [\"http://a.test\"]"
        );
    }

    fn check(request: Value, expect: Result<Value, &str>) {
        match (Request::from_json(&request), expect) {
            (Ok(request), Ok(schema)) => assert_eq!(request.input_schema(), schema),
            (Err(error), Err(message)) => {
                assert_eq!(error_chain(&error), message)
            }
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn plain_parameters_are_required_strings() {
        check(
            json!({"name": "read_file", "description": "d", "parameters": {"path": "The file"}}),
            Ok(json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "The file"}},
                "required": ["path"],
            })),
        );
    }

    #[test]
    fn full_parameters_keep_their_bounds() {
        check(
            json!({"name": "count_words", "description": "d", "parameters": {
                "text": {"type": "string", "required": true, "maxLength": 10},
                "top": {"type": "integer", "minimum": 1, "default": 3},
                "tags": {"type": "array"},
            }}),
            Ok(json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "maxLength": 10},
                    "top": {"type": "integer", "minimum": 1, "default": 3},
                    "tags": {"type": "array", "items": {"type": ["string", "number", "boolean"]}},
                },
                "required": ["text"],
            })),
        );
    }

    #[test]
    fn refuses_bad_requests() {
        check(
            json!({"name": "custom_tool", "description": "d"}),
            Err(
                "invalid name: tool name `custom_tool` is reserved: `custom_tool` and names starting with `custom_tool_` belong to the meta-tool",
            ),
        );
        check(
            json!({"name": "../x", "description": "d"}),
            Err(
                "the request does not meet the request schema: /name: \"../x\" does not match \"^[a-z][a-z0-9_]*$\"",
            ),
        );
        check(
            json!({"name": "a", "description": "d", "timeout_seconds": 301}),
            Err(
                "the request does not meet the request schema: /timeout_seconds: 301 is greater than the maximum of 300",
            ),
        );
        check(
            json!({"name": "a", "description": "d", "language": "manifest", "parameters": {"o": {"type": "object"}}}),
            Err("parameter `o`: the manifest language has no `object` parameters"),
        );
    }
}

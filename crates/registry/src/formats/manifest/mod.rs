//! Nanocoder manifests: `NAME.md` with YAML frontmatter and a shell-script body, parsed and checked at load time, and the command that runs a call.
//!
//! Every field of the proposal is read, plus `fail_on_exit`; any other key is
//! an error that names it, because a misspelt key silently ignored (say
//! `timeout: 5000`) is worse than a tool that does not load.
//! Every error names the field as written in the file, e.g.
//! `parameters.namespace.pattern: only allowed for type string`, and all
//! errors of a file are reported at once (the frontmatter fields in a fixed order, then the body).

pub(crate) mod expand;
pub(crate) mod render;
mod tag_context;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Number, Value};
use serde_norway::Value as Yaml;
use toolsmith_executor::Command;

use crate::formats::Approval;
use crate::formats::declared_tests::{TestCase, TestsError, parse_tests};
use crate::formats::manifest::expand::{ExpandError, Expansion};
use crate::formats::manifest::render::{Template, TemplateError};
use crate::message::error_chain;
use crate::name::{NameError, ToolName};
use crate::oob::{self, is_identifier};
use crate::sandbox::{SandboxDeclaration, SandboxDeclarationError};
use crate::schema::{InputSchema, OutputSchema, SchemaError};

/// The file-name suffix of a Nanocoder manifest; the stem is the tool name.
pub(crate) const FILE_SUFFIX: &str = ".md";

/// The "probe" of a manifest, for messages: it is read, never run.
pub(crate) const READ: &str = "read";

/// The default `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// The largest `timeout_ms` a manifest may declare.
pub const MAX_TIMEOUT_MS: u64 = 300_000;

const TOP_LEVEL_KEYS: &str = "name, description, parameters, approval, read_only, timeout_ms, cwd, env, shell, fail_on_exit, output_schema, sandbox, tests";
const PARAMETER_KEYS: &str =
    "type, description, required, default, enum, pattern, minLength, maxLength, min, max, items";
const ITEMS_KEYS: &str = "type, description, enum, pattern, minLength, maxLength, min, max";
const TYPES: &str = "string, number, integer, boolean, array";

/// A parsed and checked manifest.
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub(crate) name: ToolName,
    pub(crate) description: String,
    pub(crate) parameters: Vec<Parameter>,
    pub(crate) input_schema: InputSchema,
    pub(crate) approval: Approval,
    pub(crate) read_only: bool,
    pub(crate) timeout: Duration,
    pub(crate) cwd: Option<Expansion>,
    pub(crate) env: Vec<(String, Expansion)>,
    pub(crate) shell: Option<Shell>,
    pub(crate) fail_on_exit: bool,
    /// toolsmith's addition: when set, stdout is parsed as JSON and must meet this schema.
    pub(crate) output_schema: Option<OutputSchema>,
    /// What the manifest declares about its own sandbox.
    pub(crate) sandbox: SandboxDeclaration,
    /// toolsmith's addition: the declared test cases `toolsmith test` runs.
    pub(crate) tests: Vec<TestCase>,
    pub(crate) body: Template,
}

/// The shell a manifest asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shell {
    Bash,
    Sh,
}

impl Shell {
    pub(crate) fn program(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Sh => "sh",
        }
    }
}

/// One declared parameter, in declaration order.
#[derive(Debug, Clone)]
pub(crate) struct Parameter {
    pub(crate) name: String,
    pub(crate) default: Option<Value>,
    /// The type is integer or number: the parameter may stand in arithmetic.
    pub(crate) numeric: bool,
}

/// The JSON type of a parameter (or of an array's items).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `string`.
    String,
    /// `number`.
    Number,
    /// `integer`.
    Integer,
    /// `boolean`.
    Boolean,
    /// `array`.
    Array,
}

impl ParamType {
    fn parse(text: &str) -> Option<ParamType> {
        Some(match text {
            "string" => ParamType::String,
            "number" => ParamType::Number,
            "integer" => ParamType::Integer,
            "boolean" => ParamType::Boolean,
            "array" => ParamType::Array,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Number => "number",
            ParamType::Integer => "integer",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
        }
    }

    /// Whether `value` (JSON) has this type; arrays are checked element by element elsewhere.
    fn accepts(self, value: &Value) -> bool {
        match self {
            ParamType::String => value.is_string(),
            ParamType::Number => value.is_number(),
            ParamType::Integer => value.is_i64() || value.is_u64(),
            ParamType::Boolean => value.is_boolean(),
            ParamType::Array => value.is_array(),
        }
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing wrong with a manifest; `field` is the path of the key as written
/// in the file, e.g. `parameters.count.type`.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file does not start with a `---` line.
    #[error("the file must start with a `---` line opening the YAML frontmatter")]
    NoOpeningFence,
    /// No `---` line closes the frontmatter.
    #[error("no `---` line closes the YAML frontmatter opened on line 1")]
    NoClosingFence,
    /// The frontmatter is not valid YAML.
    #[error("frontmatter: invalid YAML at line {line}, column {column}: {message}")]
    Yaml {
        /// The file's line.
        line: usize,
        /// The column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The frontmatter is not valid YAML, at no known place.
    #[error("frontmatter: invalid YAML: {message}")]
    YamlNoLocation {
        /// The parser's message.
        message: String,
    },
    /// The frontmatter (or a nested value) is not a mapping.
    #[error("{field}: expected a mapping of keys, got {found}")]
    NotAMapping {
        /// The field.
        field: String,
        /// What was found.
        found: &'static str,
    },
    /// A key the format does not have.
    #[error("{field}: unknown key{}; expected one of {expected}", hint.map(|hint| format!(" (did you mean `{hint}`?)")).unwrap_or_default())]
    UnknownKey {
        /// The field.
        field: String,
        /// The keys allowed there.
        expected: &'static str,
        /// A likely intended key.
        hint: Option<&'static str>,
    },
    /// A required key is absent.
    #[error("{field}: missing")]
    Missing {
        /// The field.
        field: String,
    },
    /// A value of the wrong YAML type.
    #[error("{field}: expected {expected}, got {found}")]
    WrongType {
        /// The field.
        field: String,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: &'static str,
    },
    /// An empty string where text is needed.
    #[error("{field}: must not be empty")]
    Empty {
        /// The field.
        field: String,
    },
    /// A value outside a closed set.
    #[error("{field}: expected one of {expected}, got {got}")]
    NotOneOf {
        /// The field.
        field: String,
        /// The allowed values.
        expected: &'static str,
        /// The value, as YAML would show it.
        got: String,
    },
    /// The `name` does not match the name pattern.
    #[error("name: {name:?} does not match ^[a-z][a-z0-9_]*$")]
    NameSyntax {
        /// The declared name.
        name: String,
    },
    /// The `name` is refused for another reason (reserved, too long).
    #[error("name: invalid")]
    Name {
        /// Why.
        #[source]
        source: NameError,
    },
    /// The `name` is not the file's.
    #[error(
        "name: {declared:?} does not match the file name, which makes it \"{expected}\"; rename the file or fix the name"
    )]
    NameMismatch {
        /// The declared name.
        declared: String,
        /// The name from the file name.
        expected: ToolName,
    },
    /// A parameter name that a body tag could not name.
    #[error("parameters.{name}: a parameter name must match ^[A-Za-z_][A-Za-z0-9_]*$")]
    ParameterName {
        /// The name.
        name: String,
    },
    /// A parameter name ending in `_FILE`, which would pass for the file of another's value.
    #[error(
        "parameters.{name}: a parameter name must not end in _FILE, which names the file of a large value (TOOLSMITH_ARG_<name>_FILE)"
    )]
    ReservedParameterName {
        /// The name.
        name: String,
    },
    /// A constraint used with a type it does not apply to.
    #[error("{field}: only allowed for type {allowed}")]
    NotForType {
        /// The field.
        field: String,
        /// The types it applies to.
        allowed: &'static str,
    },
    /// `items: {type: array}`.
    #[error("{field}: arrays of arrays are not supported")]
    NestedArray {
        /// The field.
        field: String,
    },
    /// A negative or fractional length.
    #[error("{field}: expected a non-negative integer, got {got}")]
    NotACount {
        /// The field.
        field: String,
        /// The value.
        got: String,
    },
    /// `min > max` or `minLength > maxLength`.
    #[error("{field}: {low} is greater than {high_key} {high}")]
    Inverted {
        /// The field of the lower bound.
        field: String,
        /// The lower bound.
        low: String,
        /// The key of the upper bound.
        high_key: &'static str,
        /// The upper bound.
        high: String,
    },
    /// An empty `enum`.
    #[error("{field}: must list at least one value")]
    EmptyEnum {
        /// The field.
        field: String,
    },
    /// A value listed twice in `enum`.
    #[error("{field}: {value} is listed twice")]
    DuplicateEnum {
        /// The field.
        field: String,
        /// The value.
        value: String,
    },
    /// An `enum` or `default` value of the wrong type.
    #[error("{field}: {value} is not of type {expected}")]
    ValueType {
        /// The field, e.g. `parameters.x.enum[1]`.
        field: String,
        /// The value, as JSON.
        value: String,
        /// The parameter's type.
        expected: ParamType,
    },
    /// A `default` not listed in `enum`.
    #[error("{field}: {value} is not one of the enum values")]
    DefaultNotInEnum {
        /// The field.
        field: String,
        /// The value, as JSON.
        value: String,
    },
    /// An `enum` or `default` value that breaks a constraint of its parameter.
    #[error("{field}: {message}")]
    Constraint {
        /// The field.
        field: String,
        /// The validator's message.
        message: String,
    },
    /// A `pattern` that is not a valid regular expression.
    #[error("{field}: invalid regular expression: {reason}")]
    Pattern {
        /// The field.
        field: String,
        /// The compiler's message.
        reason: String,
    },
    /// A `default` on a required parameter, which could never apply.
    #[error("{field}: a required parameter cannot have a default")]
    RequiredWithDefault {
        /// The field.
        field: String,
    },
    /// `timeout_ms` of 0.
    #[error("timeout_ms: must be at least 1")]
    TimeoutZero,
    /// `timeout_ms` above the maximum.
    #[error("timeout_ms: {value} exceeds the maximum of {MAX_TIMEOUT_MS}")]
    TimeoutTooLarge {
        /// The declared value.
        value: u64,
    },
    /// `read_only: true` with `approval: destructive`.
    #[error("read_only: a tool with approval destructive cannot be read-only")]
    DestructiveReadOnly,
    /// An environment variable name that no shell could use.
    #[error("env.{name}: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$")]
    EnvName {
        /// The name.
        name: String,
    },
    /// A bad `${...}` in `cwd` or `env`.
    #[error("{field}: invalid substitution")]
    Expansion {
        /// The field.
        field: String,
        /// Why.
        #[source]
        source: ExpandError,
    },
    /// The body is empty.
    #[error("body: empty; the body is the shell script the tool runs")]
    EmptyBody,
    /// The body is not a valid template.
    #[error("body: {error}")]
    Template {
        /// Why.
        error: TemplateError,
    },
    /// The JSON Schema built from the parameters was refused.
    #[error("parameters: the JSON Schema built from them is invalid")]
    Schema {
        /// Why.
        #[source]
        source: SchemaError,
    },
    /// The declared `tests` are not a valid list of cases.
    #[error("tests: {error}")]
    Tests {
        /// Why.
        error: TestsError,
    },
    /// The declared `output_schema` is not a valid JSON Schema object.
    #[error("output_schema: not a valid JSON Schema")]
    OutputSchema {
        /// Why.
        #[source]
        source: SchemaError,
    },
    /// The declared `sandbox` was refused.
    #[error("sandbox: {source}")]
    Sandbox {
        /// Why.
        source: SandboxDeclarationError,
    },
}

/// Every error of one manifest, shown one after the other, separated by `; `.
#[derive(Debug, thiserror::Error)]
pub struct ManifestErrors {
    /// The errors; never empty.
    pub errors: Vec<ManifestError>,
}

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let messages: Vec<String> = self.errors.iter().map(|error| error_chain(error)).collect();
        f.write_str(&messages.join("; "))
    }
}

/// Why a manifest's call could not be prepared.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommandError {
    #[error("no `{shell}` was found in PATH, /bin or /usr/bin")]
    NoShell { shell: &'static str },
    #[error(transparent)]
    Executor(#[from] toolsmith_executor::Error),
}

/// Parses `text`, the contents of a manifest whose file name makes it `expected`.
pub(crate) fn parse(text: &str, expected: &ToolName) -> Result<Manifest, ManifestErrors> {
    let mut errors = Vec::new();
    let manifest = parse_collecting(text, expected, &mut errors);
    match manifest {
        Some(manifest) if errors.is_empty() => Ok(manifest),
        _ => {
            if errors.is_empty() {
                errors.push(ManifestError::NoOpeningFence);
            }
            Err(ManifestErrors { errors })
        }
    }
}

/// Splits the file into the frontmatter, the body and the body's first line number.
fn split(text: &str) -> Result<(&str, &str, usize), ManifestError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(ManifestError::NoOpeningFence)?;
    if first.trim_end() != "---" {
        return Err(ManifestError::NoOpeningFence);
    }
    let mut offset = first.len();
    for (index, line) in lines.enumerate() {
        if line.trim_end() == "---" {
            let frontmatter = &text[first.len()..offset];
            let body = &text[offset + line.len()..];
            // Line 1 is the opening fence, line index + 2 the closing one.
            return Ok((frontmatter, body, index + 3));
        }
        offset += line.len();
    }
    Err(ManifestError::NoClosingFence)
}

fn parse_collecting(
    text: &str,
    expected: &ToolName,
    errors: &mut Vec<ManifestError>,
) -> Option<Manifest> {
    let (frontmatter, body, body_line) = match split(text) {
        Ok(parts) => parts,
        Err(error) => {
            errors.push(error);
            return None;
        }
    };
    let yaml: Yaml = match serde_norway::from_str(frontmatter) {
        Ok(yaml) => yaml,
        Err(error) => {
            errors.push(yaml_error(&error));
            return None;
        }
    };
    let mapping = match yaml {
        Yaml::Mapping(mapping) => mapping,
        // An empty frontmatter has every required key missing.
        Yaml::Null => serde_norway::Mapping::new(),
        other => {
            errors.push(ManifestError::NotAMapping {
                field: "frontmatter".to_owned(),
                found: yaml_type(&other),
            });
            return None;
        }
    };
    let fields = Fields::new(&mapping, "", TOP_LEVEL_KEYS, errors);

    if fields.get("name").is_none() {
        errors.push(ManifestError::Missing {
            field: "name".to_owned(),
        });
    }
    let name = fields
        .string("name", errors)
        .and_then(|name| check_name(name, expected, errors));
    let description = fields.required_text("description", errors);
    let (parameters, properties, required) = match fields.get("parameters") {
        None | Some(Yaml::Null) => (Vec::new(), Map::new(), Vec::new()),
        Some(Yaml::Mapping(declared)) => parse_parameters(declared, errors),
        Some(other) => {
            errors.push(ManifestError::NotAMapping {
                field: "parameters".to_owned(),
                found: yaml_type(other),
            });
            (Vec::new(), Map::new(), Vec::new())
        }
    };
    let approval = match fields.string("approval", errors) {
        None => Some(Approval::Always),
        Some("never") => Some(Approval::Never),
        Some("always") => Some(Approval::Always),
        Some("destructive") => Some(Approval::Destructive),
        Some(other) => {
            errors.push(ManifestError::NotOneOf {
                field: "approval".to_owned(),
                expected: "never, always, destructive",
                got: format!("{other:?}"),
            });
            None
        }
    };
    let read_only = fields.boolean("read_only", errors);
    let read_only = match (approval, read_only) {
        (Some(Approval::Destructive), Some(true)) => {
            errors.push(ManifestError::DestructiveReadOnly);
            false
        }
        (_, Some(read_only)) => read_only,
        // The proposal's `!approval==always` would make a destructive tool
        // read-only; only a tool that needs no approval is assumed to only read.
        (approval, None) => approval == Some(Approval::Never),
    };
    let timeout_ms = match fields.get("timeout_ms") {
        None => DEFAULT_TIMEOUT_MS,
        Some(value) => match value.as_u64() {
            Some(0) => {
                errors.push(ManifestError::TimeoutZero);
                DEFAULT_TIMEOUT_MS
            }
            Some(value) if value > MAX_TIMEOUT_MS => {
                errors.push(ManifestError::TimeoutTooLarge { value });
                DEFAULT_TIMEOUT_MS
            }
            Some(value) => value,
            None => {
                errors.push(ManifestError::WrongType {
                    field: "timeout_ms".to_owned(),
                    expected: "a positive integer of milliseconds",
                    found: yaml_type(value),
                });
                DEFAULT_TIMEOUT_MS
            }
        },
    };
    let cwd = fields
        .string("cwd", errors)
        .and_then(|cwd| expansion("cwd", cwd, errors));
    let env = match fields.get("env") {
        None | Some(Yaml::Null) => Vec::new(),
        Some(Yaml::Mapping(vars)) => parse_env(vars, errors),
        Some(other) => {
            errors.push(ManifestError::NotAMapping {
                field: "env".to_owned(),
                found: yaml_type(other),
            });
            Vec::new()
        }
    };
    let shell = match fields.string("shell", errors) {
        None => None,
        Some("bash") => Some(Shell::Bash),
        Some("sh") => Some(Shell::Sh),
        Some(other) => {
            errors.push(ManifestError::NotOneOf {
                field: "shell".to_owned(),
                expected: "bash, sh",
                got: format!("{other:?}"),
            });
            None
        }
    };
    let fail_on_exit = fields.boolean("fail_on_exit", errors).unwrap_or(false);
    let output_schema = fields.get("output_schema").and_then(|schema| {
        OutputSchema::new(yaml_to_json(schema))
            .map_err(|source| errors.push(ManifestError::OutputSchema { source }))
            .ok()
    });
    let tests = match fields.get("tests") {
        None | Some(Yaml::Null) => Vec::new(),
        Some(tests) => parse_tests(&yaml_to_json(tests))
            .map_err(|error| errors.push(ManifestError::Tests { error }))
            .unwrap_or_default(),
    };

    let sandbox = fields
        .get("sandbox")
        .and_then(|sandbox| {
            SandboxDeclaration::from_json(&yaml_to_json(sandbox))
                .map_err(|source| errors.push(ManifestError::Sandbox { source }))
                .ok()
        })
        .unwrap_or_default();

    let declared: Vec<(&str, bool)> = parameters
        .iter()
        .map(|parameter| (parameter.name.as_str(), parameter.numeric))
        .collect();
    let template = if body.trim().is_empty() {
        errors.push(ManifestError::EmptyBody);
        None
    } else {
        Template::parse(body, body_line, &declared)
            .map_err(|source| errors.push(ManifestError::Template { error: source }))
            .ok()
    };

    let mut schema = Map::new();
    schema.insert("type".to_owned(), Value::from("object"));
    schema.insert("properties".to_owned(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".to_owned(), Value::from(required));
    }
    let input_schema = InputSchema::new(Value::Object(schema))
        .map_err(|source| errors.push(ManifestError::Schema { source }))
        .ok();

    Some(Manifest {
        name: name?,
        description: description?,
        parameters,
        input_schema: input_schema?,
        approval: approval?,
        read_only,
        timeout: Duration::from_millis(timeout_ms),
        cwd,
        env,
        shell,
        fail_on_exit,
        output_schema,
        sandbox,
        tests,
        body: template?,
    })
}

fn yaml_error(error: &serde_norway::Error) -> ManifestError {
    let text = error.to_string();
    match error.location() {
        Some(location) => {
            // The parser appends its own location, counted from the frontmatter.
            let message = match text.rfind(" at line ") {
                Some(index) => &text[..index],
                None => &text,
            };
            let message = renumber_lines(message);
            ManifestError::Yaml {
                line: location.line() + 1,
                column: location.column(),
                message,
            }
        }
        None => ManifestError::YamlNoLocation { message: text },
    }
}

/// `message` with every `line N` (counted from the frontmatter's first line)
/// turned into the line of the file, one more.
fn renumber_lines(message: &str) -> String {
    let mut renumbered = String::new();
    let mut rest = message;
    while let Some(index) = rest.find("line ") {
        let after = &rest[index + "line ".len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        renumbered.push_str(&rest[..index + "line ".len()]);
        match after[..digits].parse::<usize>() {
            Ok(line) => renumbered.push_str(&(line + 1).to_string()),
            Err(_) => renumbered.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    renumbered.push_str(rest);
    renumbered
}

fn check_name(
    name: &str,
    expected: &ToolName,
    errors: &mut Vec<ManifestError>,
) -> Option<ToolName> {
    let well_formed = name.starts_with(|first: char| first.is_ascii_lowercase())
        && name.chars().all(|character| {
            character.is_ascii_lowercase() || character.is_ascii_digit() || character == '_'
        });
    if !well_formed {
        errors.push(ManifestError::NameSyntax {
            name: name.to_owned(),
        });
        return None;
    }
    let tool_name = match ToolName::new(name) {
        Ok(tool_name) => tool_name,
        Err(source) => {
            errors.push(ManifestError::Name { source });
            return None;
        }
    };
    if &tool_name != expected {
        errors.push(ManifestError::NameMismatch {
            declared: name.to_owned(),
            expected: expected.clone(),
        });
        return None;
    }
    Some(tool_name)
}

fn expansion(field: &str, text: &str, errors: &mut Vec<ManifestError>) -> Option<Expansion> {
    Expansion::parse(text)
        .map_err(|source| {
            errors.push(ManifestError::Expansion {
                field: field.to_owned(),
                source,
            })
        })
        .ok()
}

fn parse_env(
    vars: &serde_norway::Mapping,
    errors: &mut Vec<ManifestError>,
) -> Vec<(String, Expansion)> {
    let mut env = Vec::new();
    for (key, value) in vars {
        let Some(name) = key.as_str() else {
            errors.push(ManifestError::WrongType {
                field: "env".to_owned(),
                expected: "variable names as keys",
                found: yaml_type(key),
            });
            continue;
        };
        if !is_identifier(name) {
            errors.push(ManifestError::EnvName {
                name: name.to_owned(),
            });
            continue;
        }
        let field = format!("env.{name}");
        let text = match value {
            Yaml::String(text) => text.clone(),
            Yaml::Number(number) => number.to_string(),
            Yaml::Bool(flag) => flag.to_string(),
            other => {
                errors.push(ManifestError::WrongType {
                    field,
                    expected: "a string",
                    found: yaml_type(other),
                });
                continue;
            }
        };
        if let Some(expansion) = expansion(&field, &text, errors) {
            env.push((name.to_owned(), expansion));
        }
    }
    env
}

/// The parameters in declaration order, their JSON Schema properties, and the required names.
fn parse_parameters(
    declared: &serde_norway::Mapping,
    errors: &mut Vec<ManifestError>,
) -> (Vec<Parameter>, Map<String, Value>, Vec<String>) {
    let mut parameters = Vec::new();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (key, value) in declared {
        let Some(name) = key.as_str() else {
            errors.push(ManifestError::WrongType {
                field: "parameters".to_owned(),
                expected: "parameter names as keys",
                found: yaml_type(key),
            });
            continue;
        };
        if !is_identifier(name) {
            errors.push(ManifestError::ParameterName {
                name: name.to_owned(),
            });
            continue;
        }
        if name.ends_with(oob::FILE_SUFFIX) {
            errors.push(ManifestError::ReservedParameterName {
                name: name.to_owned(),
            });
            continue;
        }
        let field = format!("parameters.{name}");
        let Yaml::Mapping(mapping) = value else {
            errors.push(ManifestError::NotAMapping {
                field,
                found: yaml_type(value),
            });
            continue;
        };
        let fields = Fields::new(mapping, &field, PARAMETER_KEYS, errors);
        let is_required = fields.boolean("required", errors).unwrap_or(false);
        let Some((schema, kind)) = parameter_schema(&fields, &field, false, errors) else {
            continue;
        };
        let default = fields.get("default").map(|default| {
            let default_field = format!("{field}.default");
            if is_required {
                errors.push(ManifestError::RequiredWithDefault {
                    field: default_field.clone(),
                });
            }
            let default = yaml_to_json(default);
            check_value(&default_field, &default, kind, &schema, errors);
            if let Some(Value::Array(allowed)) = schema.get("enum")
                && !allowed.contains(&default)
            {
                errors.push(ManifestError::DefaultNotInEnum {
                    field: default_field,
                    value: default.to_string(),
                });
            }
            default
        });
        let mut schema = schema;
        if let Some(default) = &default {
            schema.insert("default".to_owned(), default.clone());
        }
        if is_required {
            required.push(name.to_owned());
        }
        properties.insert(name.to_owned(), Value::Object(schema));
        parameters.push(Parameter {
            name: name.to_owned(),
            default,
            numeric: matches!(kind, ParamType::Integer | ParamType::Number),
        });
    }
    (parameters, properties, required)
}

/// The JSON Schema of one parameter (or of `items` when `is_items`), without
/// `default`; `None` when its type is unusable.
fn parameter_schema(
    fields: &Fields<'_>,
    field: &str,
    is_items: bool,
    errors: &mut Vec<ManifestError>,
) -> Option<(Map<String, Value>, ParamType)> {
    let type_field = format!("{field}.type");
    let kind = match fields.get("type") {
        None => {
            errors.push(ManifestError::Missing { field: type_field });
            return None;
        }
        Some(Yaml::String(text)) => match ParamType::parse(text) {
            Some(ParamType::Array) if is_items => {
                errors.push(ManifestError::NestedArray { field: type_field });
                return None;
            }
            Some(kind) => kind,
            None => {
                errors.push(ManifestError::NotOneOf {
                    field: type_field,
                    expected: TYPES,
                    got: format!("{text:?}"),
                });
                return None;
            }
        },
        Some(other) => {
            errors.push(ManifestError::WrongType {
                field: type_field,
                expected: "a string",
                found: yaml_type(other),
            });
            return None;
        }
    };
    let mut schema = Map::new();
    schema.insert("type".to_owned(), Value::from(kind.as_str()));
    if let Some(description) = fields.string("description", errors) {
        schema.insert("description".to_owned(), Value::from(description));
    }
    let is_string = kind == ParamType::String;
    let is_numeric = matches!(kind, ParamType::Number | ParamType::Integer);
    let only_for =
        |key: &str, allowed: bool, allowed_types: &'static str, errors: &mut Vec<ManifestError>| {
            let present = fields.get(key).is_some();
            if present && !allowed {
                errors.push(ManifestError::NotForType {
                    field: format!("{field}.{key}"),
                    allowed: allowed_types,
                });
            }
            present && allowed
        };
    if only_for("pattern", is_string, "string", errors)
        && let Some(pattern) = fields.string("pattern", errors)
    {
        match jsonschema::validator_for(&serde_json::json!({"pattern": pattern})) {
            Ok(_) => {
                schema.insert("pattern".to_owned(), Value::from(pattern));
            }
            Err(error) => errors.push(ManifestError::Pattern {
                field: format!("{field}.pattern"),
                reason: error.to_string(),
            }),
        }
    }
    let mut lengths = [None, None];
    for (slot, key) in ["minLength", "maxLength"].into_iter().enumerate() {
        if only_for(key, is_string, "string", errors) {
            lengths[slot] = fields.count(key, errors);
            if let Some(length) = lengths[slot] {
                schema.insert(key.to_owned(), Value::from(length));
            }
        }
    }
    if let [Some(low), Some(high)] = lengths
        && low > high
    {
        errors.push(ManifestError::Inverted {
            field: format!("{field}.minLength"),
            low: low.to_string(),
            high_key: "maxLength",
            high: high.to_string(),
        });
    }
    let mut bounds = [None, None];
    for (slot, (key, schema_key)) in [("min", "minimum"), ("max", "maximum")]
        .into_iter()
        .enumerate()
    {
        if only_for(key, is_numeric, "number or integer", errors) {
            bounds[slot] = fields.number(key, errors);
            if let Some(bound) = &bounds[slot] {
                schema.insert(schema_key.to_owned(), Value::Number(bound.clone()));
            }
        }
    }
    if let [Some(low), Some(high)] = &bounds
        && low.as_f64() > high.as_f64()
    {
        errors.push(ManifestError::Inverted {
            field: format!("{field}.min"),
            low: low.to_string(),
            high_key: "max",
            high: high.to_string(),
        });
    }
    if !is_items {
        let items_field = format!("{field}.items");
        if only_for("items", kind == ParamType::Array, "array", errors) {
            match fields.get("items") {
                Some(Yaml::Mapping(items)) => {
                    let item_fields = Fields::new(items, &items_field, ITEMS_KEYS, errors);
                    if let Some((items_schema, _)) =
                        parameter_schema(&item_fields, &items_field, true, errors)
                    {
                        schema.insert("items".to_owned(), Value::Object(items_schema));
                    }
                }
                Some(other) => errors.push(ManifestError::NotAMapping {
                    field: items_field,
                    found: yaml_type(other),
                }),
                None => {}
            }
        } else if kind == ParamType::Array {
            // Without `items`, any scalar element is accepted: each renders as one word.
            schema.insert(
                "items".to_owned(),
                serde_json::json!({"type": ["string", "number", "boolean"]}),
            );
        }
    }
    if only_for(
        "enum",
        kind != ParamType::Array,
        "string, number, integer or boolean (for arrays, put it under items)",
        errors,
    ) {
        parse_enum(fields, field, kind, &mut schema, errors);
    }
    Some((schema, kind))
}

fn parse_enum(
    fields: &Fields<'_>,
    field: &str,
    kind: ParamType,
    schema: &mut Map<String, Value>,
    errors: &mut Vec<ManifestError>,
) {
    let enum_field = format!("{field}.enum");
    let Some(value) = fields.get("enum") else {
        return;
    };
    let Yaml::Sequence(values) = value else {
        errors.push(ManifestError::WrongType {
            field: enum_field,
            expected: "a list of values",
            found: yaml_type(value),
        });
        return;
    };
    if values.is_empty() {
        errors.push(ManifestError::EmptyEnum { field: enum_field });
        return;
    }
    let mut allowed: Vec<Value> = Vec::new();
    for (index, value) in values.iter().enumerate() {
        let value = yaml_to_json(value);
        let value_field = format!("{enum_field}[{index}]");
        if allowed.contains(&value) {
            errors.push(ManifestError::DuplicateEnum {
                field: value_field,
                value: value.to_string(),
            });
            continue;
        }
        if check_value(&value_field, &value, kind, schema, errors) {
            allowed.push(value);
        }
    }
    schema.insert("enum".to_owned(), Value::Array(allowed));
}

/// Checks an `enum` or `default` value against the parameter's type and
/// constraints (the schema so far); true when it passes.
fn check_value(
    field: &str,
    value: &Value,
    kind: ParamType,
    schema: &Map<String, Value>,
    errors: &mut Vec<ManifestError>,
) -> bool {
    if !kind.accepts(value) {
        errors.push(ManifestError::ValueType {
            field: field.to_owned(),
            value: value.to_string(),
            expected: kind,
        });
        return false;
    }
    let mut constraints = schema.clone();
    constraints.remove("enum");
    let Ok(validator) = jsonschema::validator_for(&Value::Object(constraints)) else {
        // An invalid pattern is reported on its own field.
        return true;
    };
    match validator.iter_errors(value).next() {
        None => true,
        Some(error) => {
            let at = error.instance_path().to_string();
            let message = if at.is_empty() {
                error.to_string()
            } else {
                format!("{error} (at {at})")
            };
            errors.push(ManifestError::Constraint {
                field: field.to_owned(),
                message,
            });
            false
        }
    }
}

/// A mapping's keys, checked against the allowed ones.
struct Fields<'a> {
    mapping: &'a serde_norway::Mapping,
    prefix: String,
}

impl<'a> Fields<'a> {
    fn new(
        mapping: &'a serde_norway::Mapping,
        prefix: &str,
        allowed: &'static str,
        errors: &mut Vec<ManifestError>,
    ) -> Fields<'a> {
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}.")
        };
        for key in mapping.keys() {
            let known = key
                .as_str()
                .is_some_and(|key| allowed.split(", ").any(|allowed_key| allowed_key == key));
            if !known {
                let text = key
                    .as_str()
                    .map_or_else(|| yaml_scalar_text(key), str::to_owned);
                errors.push(ManifestError::UnknownKey {
                    field: format!("{prefix}{text}"),
                    expected: allowed,
                    hint: key.as_str().and_then(|key| hint(key, allowed)),
                });
            }
        }
        Fields { mapping, prefix }
    }

    fn get(&self, key: &str) -> Option<&'a Yaml> {
        self.mapping.get(key)
    }

    fn field(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn string(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<&'a str> {
        match self.get(key)? {
            Yaml::String(text) => Some(text),
            other => {
                errors.push(ManifestError::WrongType {
                    field: self.field(key),
                    expected: "a string",
                    found: yaml_type(other),
                });
                None
            }
        }
    }

    fn required_text(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<String> {
        if self.get(key).is_none() {
            errors.push(ManifestError::Missing {
                field: self.field(key),
            });
            return None;
        }
        let text = self.string(key, errors)?;
        if text.trim().is_empty() {
            errors.push(ManifestError::Empty {
                field: self.field(key),
            });
            return None;
        }
        Some(text.trim_end().to_owned())
    }

    fn boolean(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<bool> {
        match self.get(key)? {
            Yaml::Bool(flag) => Some(*flag),
            other => {
                errors.push(ManifestError::WrongType {
                    field: self.field(key),
                    expected: "true or false",
                    found: yaml_type(other),
                });
                None
            }
        }
    }

    fn count(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<u64> {
        let value = self.get(key)?;
        if let Some(count) = value.as_u64() {
            return Some(count);
        }
        errors.push(ManifestError::NotACount {
            field: self.field(key),
            got: yaml_scalar_text(value),
        });
        None
    }

    fn number(&self, key: &str, errors: &mut Vec<ManifestError>) -> Option<Number> {
        match yaml_to_json(self.get(key)?) {
            Value::Number(number) => Some(number),
            _ => {
                errors.push(ManifestError::WrongType {
                    field: self.field(key),
                    expected: "a number",
                    found: self.get(key).map_or("nothing", yaml_type),
                });
                None
            }
        }
    }
}

/// The key an author probably meant, for the keys JSON Schema spells differently.
fn hint(key: &str, allowed: &str) -> Option<&'static str> {
    let hint = match key {
        "minimum" => "min",
        "maximum" => "max",
        "min_length" | "minlength" => "minLength",
        "max_length" | "maxlength" => "maxLength",
        "timeout" => "timeout_ms",
        "readonly" | "readOnly" => "read_only",
        "environment" => "env",
        "params" | "arguments" => "parameters",
        _ => return None,
    };
    allowed
        .split(", ")
        .any(|allowed_key| allowed_key == hint)
        .then_some(hint)
}

fn yaml_type(value: &Yaml) -> &'static str {
    match value {
        Yaml::Null => "nothing",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

/// A YAML value as short text for messages.
fn yaml_scalar_text(value: &Yaml) -> String {
    yaml_to_json(value).to_string()
}

/// A YAML value as JSON: mapping keys become strings, tags are dropped,
/// non-finite floats become null (JSON has none).
fn yaml_to_json(value: &Yaml) -> Value {
    match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(flag) => Value::Bool(*flag),
        Yaml::Number(number) => {
            if let Some(integer) = number.as_i64() {
                Value::from(integer)
            } else if let Some(integer) = number.as_u64() {
                Value::from(integer)
            } else {
                number
                    .as_f64()
                    .and_then(Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Yaml::String(text) => Value::String(text.clone()),
        Yaml::Sequence(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Mapping(mapping) => Value::Object(
            mapping
                .iter()
                .map(|(key, value)| {
                    let key = key
                        .as_str()
                        .map_or_else(|| yaml_scalar_text(key), str::to_owned);
                    (key, yaml_to_json(value))
                })
                .collect(),
        ),
        Yaml::Tagged(tagged) => yaml_to_json(&tagged.value),
    }
}

/// The variables that the manifests (`*.md`) directly in `dirs` may expand
/// from toolsmith's environment (`${NAME}` anywhere in the file), read
/// before discovery so that toolsmith can drop every other variable from
/// its own memory while it still has one thread. A file that cannot be read
/// references nothing; one that mentions `${NAME}` outside `cwd` and `env`
/// only keeps one variable more than needed.
pub fn manifest_env_references(dirs: &[std::path::PathBuf]) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|extension| extension != "md") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for (index, _) in text.match_indices("${") {
                let name: String = text[index + 2..]
                    .chars()
                    .take_while(|character| character.is_ascii_alphanumeric() || *character == '_')
                    .collect();
                if !name.is_empty() {
                    names.insert(name);
                }
            }
        }
    }
    names
}

impl Manifest {
    /// `arguments` with every declared default filled in where the caller gave no value.
    pub(crate) fn with_defaults(&self, arguments: &Value) -> Value {
        let mut filled = arguments.as_object().cloned().unwrap_or_default();
        for parameter in &self.parameters {
            if let Some(default) = &parameter.default
                && filled.get(&parameter.name).is_none_or(Value::is_null)
            {
                filled.insert(parameter.name.clone(), default.clone());
            }
        }
        Value::Object(filled)
    }

    /// The command of one call: `<shell> -c <rendered body> <name>`, in the
    /// manifest's `cwd` (relative to `project`), with `env` and the manifest's
    /// variables, expanded from toolsmith's own environment.
    ///
    /// The script holds no value: its tags refer to the `TOOLSMITH_ARG_*` variables (see
    /// `oob.rs`), which the caller adds to the command's environment; `in_file` says which
    /// of them come as a file.
    pub(crate) fn command(
        &self,
        arguments: &Value,
        in_file: &dyn Fn(&str) -> bool,
        project: &Path,
        env: &[(OsString, OsString)],
    ) -> Result<Command, CommandError> {
        let script = self.body.render(&self.with_defaults(arguments), in_file);
        let lookup = |name: &str| std::env::var(name).ok();
        let cwd = match &self.cwd {
            Some(cwd) => project.join(cwd.expand(&lookup)),
            None => project.to_path_buf(),
        };
        let shell = resolve_shell(self.shell, env)?;
        let mut command = Command::new(&shell, &cwd)?;
        command
            .arg(OsStr::new("-c"))
            .arg(OsStr::new(&script))
            .arg(OsStr::new(self.name.as_str()))
            .envs(env.to_vec());
        for (name, value) in &self.env {
            command.env(OsStr::new(name), OsStr::new(&value.expand(&lookup)));
        }
        Ok(command)
    }
}

/// The absolute path of the shell: the one asked for, else bash if there is
/// one, else sh; searched in the tool's `PATH`, then `/bin` and `/usr/bin`.
fn resolve_shell(
    shell: Option<Shell>,
    env: &[(OsString, OsString)],
) -> Result<PathBuf, CommandError> {
    let path_var = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path_var)
        .filter(|dir| dir.is_absolute())
        .collect();
    dirs.extend([PathBuf::from("/bin"), PathBuf::from("/usr/bin")]);
    let find = |program: &str| {
        dirs.iter()
            .map(|dir| dir.join(program))
            .find(|candidate| is_executable(candidate))
    };
    match shell {
        Some(shell) => find(shell.program()).ok_or(CommandError::NoShell {
            shell: shell.program(),
        }),
        None => find("bash")
            .or_else(|| find("sh"))
            .ok_or(CommandError::NoShell { shell: "sh" }),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::formats::manifest::parse;
    use crate::name::ToolName;

    /// Parses a manifest for the file `demo.md` with `frontmatter` and the
    /// body `echo hi`; `Ok` holds the input schema, `Err` the error messages.
    fn check(frontmatter: &str, expect: Result<Value, &str>) {
        let text = format!("---\n{frontmatter}---\necho hi\n");
        let actual = parse(&text, &ToolName::new("demo").unwrap())
            .map(|manifest| manifest.input_schema.as_json().clone())
            .map_err(|errors| errors.to_string());
        assert_eq!(actual, expect.map_err(str::to_owned), "{frontmatter}");
    }

    fn check_text(text: &str, expect: &str) {
        let actual = parse(text, &ToolName::new("demo").unwrap())
            .map(|_| ())
            .map_err(|errors| errors.to_string());
        assert_eq!(actual, Err(expect.to_owned()), "{text}");
    }

    const HEAD: &str = "name: demo\ndescription: A demo\n";

    fn with_params(params: &str) -> String {
        format!("{HEAD}parameters:\n{params}")
    }

    #[test]
    fn minimal() {
        check(HEAD, Ok(json!({"type": "object", "properties": {}})));
    }

    #[test]
    fn schema_conversion() {
        check(
            &with_params(
                "  namespace:\n    type: string\n    required: true\n    description: The namespace\n    pattern: ^[a-z0-9-]+$\n    minLength: 1\n    maxLength: 63\n  count:\n    type: integer\n    min: 1\n    max: 10\n    default: 3\n  mode:\n    type: string\n    enum: [fast, slow]\n    default: fast\n  tags:\n    type: array\n    items: { type: string, enum: [a, b] }\n  any:\n    type: array\n",
            ),
            Ok(json!({
                "type": "object",
                "properties": {
                    "namespace": {"type": "string", "description": "The namespace", "pattern": "^[a-z0-9-]+$", "minLength": 1, "maxLength": 63},
                    "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                    "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                    "any": {"type": "array", "items": {"type": ["string", "number", "boolean"]}}
                },
                "required": ["namespace"]
            })),
        );
    }

    #[test]
    fn fences_and_yaml() {
        check_text(
            "name: demo\n",
            "the file must start with a `---` line opening the YAML frontmatter",
        );
        check_text(
            "---\nname: demo\n",
            "no `---` line closes the YAML frontmatter opened on line 1",
        );
        check_text(
            "---\nname: demo\ndescription: [unclosed\n---\necho\n",
            "frontmatter: invalid YAML at line 4, column 1: did not find expected ',' or ']' at line 4 column 1, while parsing a flow sequence",
        );
        check_text(
            "---\nname: a\nname: b\n---\necho\n",
            "frontmatter: invalid YAML at line 2, column 1: duplicate entry with key \"name\"",
        );
        check_text(
            "---\n- a\n---\necho\n",
            "frontmatter: expected a mapping of keys, got a list",
        );
    }

    #[test]
    fn top_level_errors() {
        check("description: x\n", Err("name: missing"));
        check(
            "name: K8s\ndescription: x\n",
            Err("name: \"K8s\" does not match ^[a-z][a-z0-9_]*$"),
        );
        check(
            "name: k8s-pods\ndescription: x\n",
            Err("name: \"k8s-pods\" does not match ^[a-z][a-z0-9_]*$"),
        );
        check(
            "name: other\ndescription: x\n",
            Err(
                "name: \"other\" does not match the file name, which makes it \"demo\"; rename the file or fix the name",
            ),
        );
        check("name: demo\n", Err("description: missing"));
        check(
            "name: demo\ndescription: '  '\n",
            Err("description: must not be empty"),
        );
        check(
            "name: demo\ndescription: 5\n",
            Err("description: expected a string, got a number"),
        );
        check(
            &format!("{HEAD}approval: sometimes\n"),
            Err("approval: expected one of never, always, destructive, got \"sometimes\""),
        );
        check(
            &format!("{HEAD}read_only: yes\n"),
            Err("read_only: expected true or false, got a string"),
        );
        check(
            &format!("{HEAD}approval: destructive\nread_only: true\n"),
            Err("read_only: a tool with approval destructive cannot be read-only"),
        );
        check(
            &format!("{HEAD}timeout_ms: 400000\n"),
            Err("timeout_ms: 400000 exceeds the maximum of 300000"),
        );
        check(
            &format!("{HEAD}timeout_ms: 0\n"),
            Err("timeout_ms: must be at least 1"),
        );
        check(
            &format!("{HEAD}timeout_ms: 1.5\n"),
            Err("timeout_ms: expected a positive integer of milliseconds, got a number"),
        );
        check(
            &format!("{HEAD}shell: zsh\n"),
            Err("shell: expected one of bash, sh, got \"zsh\""),
        );
        check(
            &format!("{HEAD}fail_on_exit: 1\n"),
            Err("fail_on_exit: expected true or false, got a number"),
        );
        check(
            &format!("{HEAD}cwd: ${{HOME\n"),
            Err("cwd: invalid substitution: `${` at byte 0 is never closed by `}`"),
        );
        check(
            &format!("{HEAD}env:\n  1X: a\n"),
            Err("env.1X: a variable name must match ^[A-Za-z_][A-Za-z0-9_]*$"),
        );
        check(
            &format!("{HEAD}env:\n  A: [1]\n"),
            Err("env.A: expected a string, got a list"),
        );
        check(
            &format!("{HEAD}env:\n  A: ${{A-B}}\n"),
            Err(
                "env.A: invalid substitution: `${A-B}` does not name a variable; expected ${NAME} or ${NAME:-default}",
            ),
        );
    }

    #[test]
    fn declared_tests() {
        let text = format!(
            "---\n{HEAD}tests:\n- name: greets\n  input: {{who: Ada}}\n  expect: {{result_contains: Ada}}\n---\necho hi\n"
        );
        let manifest = parse(&text, &ToolName::new("demo").unwrap()).unwrap();
        assert_eq!(
            manifest
                .tests
                .iter()
                .map(|case| case.to_json())
                .collect::<Vec<_>>(),
            [
                json!({"name": "greets", "input": {"who": "Ada"}, "expect": {"result_contains": "Ada"}})
            ]
        );
        check(
            &format!("{HEAD}tests: [{{input: 3}}]\n"),
            Err("tests: tests[0].input must be an object of arguments, not a number"),
        );
    }

    #[test]
    fn unknown_keys() {
        check(
            &format!("{HEAD}timeout: 5000\n"),
            Err(
                "timeout: unknown key (did you mean `timeout_ms`?); expected one of name, description, parameters, approval, read_only, timeout_ms, cwd, env, shell, fail_on_exit, output_schema, sandbox, tests",
            ),
        );
        check(
            &with_params("  n:\n    type: number\n    minimum: 1\n"),
            Err(
                "parameters.n.minimum: unknown key (did you mean `min`?); expected one of type, description, required, default, enum, pattern, minLength, maxLength, min, max, items",
            ),
        );
    }

    #[test]
    fn parameter_errors() {
        check(&with_params("  n: {}\n"), Err("parameters.n.type: missing"));
        check(
            &with_params("  count:\n    type: float\n"),
            Err(
                "parameters.count.type: expected one of string, number, integer, boolean, array, got \"float\"",
            ),
        );
        check(
            &with_params("  n: string\n"),
            Err("parameters.n: expected a mapping of keys, got a string"),
        );
        check(
            &with_params("  my-param:\n    type: string\n"),
            Err("parameters.my-param: a parameter name must match ^[A-Za-z_][A-Za-z0-9_]*$"),
        );
        check(
            &with_params("  namespace:\n    type: integer\n    pattern: ^a$\n"),
            Err("parameters.namespace.pattern: only allowed for type string"),
        );
        check(
            &with_params("  n:\n    type: boolean\n    maxLength: 3\n"),
            Err("parameters.n.maxLength: only allowed for type string"),
        );
        check(
            &with_params("  n:\n    type: string\n    min: 3\n"),
            Err("parameters.n.min: only allowed for type number or integer"),
        );
        check(
            &with_params("  n:\n    type: string\n    items: {type: string}\n"),
            Err("parameters.n.items: only allowed for type array"),
        );
        check(
            &with_params("  n:\n    type: array\n    items: {type: array}\n"),
            Err("parameters.n.items.type: arrays of arrays are not supported"),
        );
        check(
            &with_params("  n:\n    type: array\n    enum: [a]\n"),
            Err(
                "parameters.n.enum: only allowed for type string, number, integer or boolean (for arrays, put it under items)",
            ),
        );
        check(
            &with_params("  n:\n    type: string\n    minLength: -1\n"),
            Err("parameters.n.minLength: expected a non-negative integer, got -1"),
        );
        check(
            &with_params("  n:\n    type: string\n    minLength: 5\n    maxLength: 2\n"),
            Err("parameters.n.minLength: 5 is greater than maxLength 2"),
        );
        check(
            &with_params("  n:\n    type: number\n    min: 10\n    max: 5\n"),
            Err("parameters.n.min: 10 is greater than max 5"),
        );
        check(
            &with_params("  n:\n    type: number\n    max: lots\n"),
            Err("parameters.n.max: expected a number, got a string"),
        );
        check(
            &with_params("  n:\n    type: string\n    pattern: '(['\n"),
            Err("parameters.n.pattern: invalid regular expression: \"([\" is not a \"regex\""),
        );
        check(
            &with_params("  n:\n    type: string\n    required: maybe\n"),
            Err("parameters.n.required: expected true or false, got a string"),
        );
    }

    #[test]
    fn enum_and_default_errors() {
        check(
            &with_params("  n:\n    type: string\n    enum: []\n"),
            Err("parameters.n.enum: must list at least one value"),
        );
        check(
            &with_params("  n:\n    type: string\n    enum: a\n"),
            Err("parameters.n.enum: expected a list of values, got a string"),
        );
        check(
            &with_params("  n:\n    type: string\n    enum: [a, 3]\n"),
            Err("parameters.n.enum[1]: 3 is not of type string"),
        );
        check(
            &with_params("  n:\n    type: string\n    enum: [a, a]\n"),
            Err("parameters.n.enum[1]: \"a\" is listed twice"),
        );
        check(
            &with_params("  n:\n    type: string\n    pattern: ^[a-z]+$\n    enum: [ok, NO]\n"),
            Err("parameters.n.enum[1]: \"NO\" does not match \"^[a-z]+$\""),
        );
        check(
            &with_params("  n:\n    type: integer\n    default: 1.5\n"),
            Err("parameters.n.default: 1.5 is not of type integer"),
        );
        check(
            &with_params("  n:\n    type: string\n    enum: [a, b]\n    default: c\n"),
            Err("parameters.n.default: \"c\" is not one of the enum values"),
        );
        check(
            &with_params("  n:\n    type: string\n    pattern: ^[0-9]+$\n    default: abc\n"),
            Err("parameters.n.default: \"abc\" does not match \"^[0-9]+$\""),
        );
        check(
            &with_params("  n:\n    type: integer\n    max: 5\n    default: 9\n"),
            Err("parameters.n.default: 9 is greater than the maximum of 5"),
        );
        check(
            &with_params(
                "  n:\n    type: array\n    items: {type: integer}\n    default: [1, x]\n",
            ),
            Err("parameters.n.default: \"x\" is not of type \"integer\" (at /1)"),
        );
        check(
            &with_params("  n:\n    type: string\n    required: true\n    default: a\n"),
            Err("parameters.n.default: a required parameter cannot have a default"),
        );
    }

    #[test]
    fn body_errors() {
        check_text(
            "---\nname: demo\ndescription: x\n---\n\n  \n",
            "body: empty; the body is the shell script the tool runs",
        );
        check_text(
            "---\nname: demo\ndescription: x\n---\necho\necho {{ nope }}\n",
            "body: line 6: {{ nope }} names no declared parameter",
        );
    }

    #[test]
    fn every_error_is_reported() {
        check(
            "name: K8s\ntimeout_ms: 400000\nparameters:\n  n:\n    type: float\n",
            Err(
                "name: \"K8s\" does not match ^[a-z][a-z0-9_]*$; description: missing; parameters.n.type: expected one of string, number, integer, boolean, array, got \"float\"; timeout_ms: 400000 exceeds the maximum of 300000",
            ),
        );
    }

    #[test]
    fn defaults_of_the_annotations() {
        let manifest = |extra: &str| {
            parse(
                &format!("---\n{HEAD}{extra}---\necho\n"),
                &ToolName::new("demo").unwrap(),
            )
            .unwrap()
        };
        let plain = manifest("");
        assert_eq!(
            (plain.approval, plain.read_only),
            (crate::formats::Approval::Always, false)
        );
        assert_eq!(plain.timeout, std::time::Duration::from_millis(30_000));
        assert_eq!(plain.shell, None);
        assert!(!plain.fail_on_exit);
        let never = manifest("approval: never\n");
        assert!(never.read_only);
        let destructive = manifest("approval: destructive\n");
        assert!(!destructive.read_only);
        let explicit = manifest(
            "approval: never\nread_only: false\ntimeout_ms: 300000\nshell: sh\nfail_on_exit: true\n",
        );
        assert!(!explicit.read_only);
        assert_eq!(explicit.shell, Some(crate::formats::manifest::Shell::Sh));
        assert!(explicit.fail_on_exit);
    }

    #[test]
    fn defaults_are_applied_before_rendering() {
        let manifest = parse(
            "---\nname: demo\ndescription: x\nparameters:\n  n:\n    type: integer\n    default: 3\n  s:\n    type: string\n---\nhead -n {{ n }}{{# s }} {{ s }}{{/ s }}\n",
            &ToolName::new("demo").unwrap(),
        )
        .unwrap();
        let render = |arguments: Value| {
            manifest
                .body
                .render(&manifest.with_defaults(&arguments), &|_| false)
        };
        assert_eq!(render(json!({})), "head -n \"${TOOLSMITH_ARG_n}\"\n");
        assert_eq!(
            render(json!({"n": 5, "s": "f"})),
            "head -n \"${TOOLSMITH_ARG_n}\" \"${TOOLSMITH_ARG_s}\"\n"
        );
        assert_eq!(
            render(json!({"n": null, "extra": 1})),
            "head -n \"${TOOLSMITH_ARG_n}\"\n"
        );
    }
}

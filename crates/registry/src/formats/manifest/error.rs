//! Why a manifest does not load ([`ManifestError`], all of a file's at once in
//! [`ManifestErrors`]) and why its command cannot be built ([`CommandError`]).

use std::fmt;

use crate::formats::declared_tests::TestsError;
use crate::formats::manifest::expand::ExpandError;
use crate::formats::manifest::frontmatter::{MAX_YAML_DEPTH, MAX_YAML_INDENT};
use crate::formats::manifest::model::{MAX_TIMEOUT_MS, ParamType};
use crate::formats::manifest::render::TemplateError;
use crate::message::error_chain;
use crate::name::NameError;
use crate::sandbox::SandboxDeclarationError;
use crate::schema::SchemaError;

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
    /// The frontmatter nests deeper than the parser is given.
    #[error(
        "frontmatter: line {line} nests deeper than {MAX_YAML_DEPTH} levels of [ ] and {{ }}, or indents past column {MAX_YAML_INDENT}"
    )]
    TooDeep {
        /// The file's line.
        line: usize,
    },
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
    /// A parameter of the list form of `parameters` declared twice.
    #[error("parameters: {name:?} is declared twice")]
    DuplicateParameter {
        /// The parameter's name.
        name: String,
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

//! What a manifest declares once parsed: the [`Manifest`] with its [`Shell`] and
//! [`Parameter`]s, and the file-name conventions of the format.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::formats::annotations::Approval;
use crate::formats::declared_tests::TestCase;
use crate::formats::manifest::expand::Expansion;
use crate::formats::manifest::render::Template;
use crate::name::ToolName;
use crate::sandbox::SandboxDeclaration;
use crate::schema::{InputSchema, OutputSchema};

pub(crate) const FILE_SUFFIX: &str = ".md";

/// The "probe" of a manifest, for messages: it is read, never run.
pub(crate) const READ: &str = "read";

/// The default `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// The largest `timeout_ms` a manifest may declare.
pub const MAX_TIMEOUT_MS: u64 = 300_000;

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
    /// What loads but deserves a look: a name that differs from the file's, keys toolsmith
    /// ignores.
    pub(crate) warnings: Vec<String>,
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
    pub(crate) fn parse(text: &str) -> Option<ParamType> {
        Some(match text {
            "string" => ParamType::String,
            "number" => ParamType::Number,
            "integer" => ParamType::Integer,
            "boolean" => ParamType::Boolean,
            "array" => ParamType::Array,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Number => "number",
            ParamType::Integer => "integer",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
        }
    }

    /// Whether `value` (JSON) has this type; arrays are checked element by element elsewhere.
    pub(crate) fn accepts(self, value: &Value) -> bool {
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

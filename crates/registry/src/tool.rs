//! A discovered tool: its name, what it tells the LLM, where it lives and how it is run.

use std::path::{Path, PathBuf};

use crate::{InputSchema, Layer, ToolName};

/// How a tool is described and run.
///
/// The first slice knows one format; the `--schema` executables of ikigai and
/// the markdown manifests of Nanocoder become further variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// An executable speaking the Kodelet protocol: `tool description` prints
    /// `{name, description, input_schema}` and `tool run` reads the JSON
    /// arguments on stdin.
    Executable,
}

impl ToolKind {
    /// The name used in listings, e.g. `executable`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Executable => "executable",
        }
    }
}

/// A tool that passed discovery and can be invoked.
#[derive(Debug, Clone)]
pub struct Tool {
    name: ToolName,
    description: String,
    input_schema: InputSchema,
    path: PathBuf,
    source: PathBuf,
    kind: ToolKind,
    layer: Layer,
}

impl Tool {
    pub(crate) fn new(
        name: ToolName,
        description: String,
        input_schema: InputSchema,
        path: PathBuf,
        source: PathBuf,
        kind: ToolKind,
        layer: Layer,
    ) -> Tool {
        Tool {
            name,
            description,
            input_schema,
            path,
            source,
            kind,
            layer,
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &ToolName {
        &self.name
    }

    /// What the tool does, as told to the LLM.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The schema its arguments must meet.
    pub fn input_schema(&self) -> &InputSchema {
        &self.input_schema
    }

    /// The absolute path of the tool's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory it was discovered in.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Its format.
    pub fn kind(&self) -> ToolKind {
        self.kind
    }

    /// The layer of the directory it was discovered in.
    pub fn layer(&self) -> Layer {
        self.layer
    }
}

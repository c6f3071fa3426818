//! The toolsmith side of the adapter: the one file that names toolsmith's embedding API.
//!
//! [`Toolbox::discover`] builds toolsmith's front door ([`Toolsmith::new`], its documented
//! defaults) and discovers a directory; [`Toolbox::call`] is one call through it. `to_rig.rs`
//! and `main.rs` see only [`ToolSpec`], [`Envelope`] and this type.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;
pub use toolsmith_registry::{Body, Envelope, ErrorCode};
use toolsmith_registry::{Catalog, Toolsmith};

/// What a model is told about one tool: the fields of a function definition.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool's name as listed (`hello`, not the MCP form `custom_tool_hello`).
    pub name: String,
    /// The tool's description.
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    pub parameters: Value,
}

/// The tools of one directory and toolsmith's front door, which runs their calls.
#[derive(Debug)]
pub struct Toolbox {
    toolsmith: Toolsmith,
    catalog: Catalog,
}

impl Toolbox {
    /// Discovers the tools of `dir`, each call to run with toolsmith's recommended limits, the
    /// least-privilege sandbox (`profile = "default"`: writes only below the working directory,
    /// no network unless a tool declares it), the default environment allow-list and the
    /// credentials of every home hidden. A file that does not load is not a tool; the returned
    /// strings say why, one per file.
    pub async fn discover(dir: &Path) -> anyhow::Result<(Toolbox, Vec<String>)> {
        let toolsmith = Toolsmith::new().context("could not set up toolsmith")?;
        let catalog = toolsmith.discover(&[dir]).await;
        let problems = catalog
            .problems()
            .iter()
            .map(|problem| format!("{}: {}", problem.path.display(), problem.message()))
            .collect();
        Ok((Toolbox { toolsmith, catalog }, problems))
    }

    /// Every tool discovered, in the catalog's order.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.catalog
            .tools()
            .iter()
            .map(|tool| ToolSpec {
                name: tool.name().as_str().to_owned(),
                description: tool.description().to_owned(),
                parameters: tool.input_schema().as_json().clone(),
            })
            .collect()
    }

    /// Calls the tool `name` with `arguments`: validated against its schema, run in its
    /// sandbox. Every refusal and failure of the tool is an envelope; the error is toolsmith
    /// failing to run anything at all.
    pub async fn call(&self, name: &str, arguments: &Value) -> anyhow::Result<Envelope> {
        Ok(self.toolsmith.call(&self.catalog, name, arguments).await?)
    }
}

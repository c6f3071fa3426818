//! The toolsmith side of the adapter: the one file that names toolsmith's embedding API.
//!
//! [`Toolbox::discover`] is the only function that builds toolsmith's pieces (executor, run
//! configuration, policy, catalog); [`Toolbox::call`] is one call into the registry. When the
//! registry's single front door lands, these two bodies are what changes: `rig.rs` and `main.rs`
//! see only [`ToolSpec`], [`Envelope`] and this type.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;
use toolsmith_executor::{
    BackendChoice, DEFAULT_ENV_ALLOW, Executor, ExecutorConfig, Limits, filtered_env,
};
pub use toolsmith_registry::{Body, Envelope, ErrorCode};
use toolsmith_registry::{
    Catalog, Policy, ReadMasks, RunConfig, SandboxProfile, SandboxSettings, credential_paths,
    discover, homes, invoke_named, protected_paths,
};

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

/// The tools of one directory and what it takes to call them: toolsmith's executor, the run
/// configuration every call runs under, and the policy every call is checked against.
#[derive(Debug)]
pub struct Toolbox {
    executor: Arc<Executor>,
    catalog: Catalog,
    config: RunConfig,
    policy: Policy,
}

impl Toolbox {
    /// Discovers the tools of `dir`, each call to run with toolsmith's recommended limits, the
    /// least-privilege sandbox (`profile = "default"`: writes only below the working directory,
    /// no network unless a tool declares it), the default environment allow-list and the
    /// credentials of every home hidden. A file that does not load is not a tool; the returned
    /// strings say why, one per file.
    pub async fn discover(dir: &Path) -> anyhow::Result<(Toolbox, Vec<String>)> {
        let executor = Arc::new(
            Executor::new(ExecutorConfig {
                backend: BackendChoice::Auto,
                max_concurrent: None,
            })
            .context("could not set up toolsmith's executor")?,
        );
        let cwd = std::env::current_dir().context("could not read the working directory")?;
        let allow: Vec<String> = DEFAULT_ENV_ALLOW
            .iter()
            .map(|&name| name.to_owned())
            .collect();
        let config = RunConfig {
            cwd: cwd.clone(),
            env: filtered_env(&allow, &[]),
            limits: Limits::recommended(),
            max_timeout: std::time::Duration::from_secs(300),
            overrides: Default::default(),
            sandbox: SandboxSettings::of_profile(SandboxProfile::Default),
            protected: protected_paths(&cwd, &[], &[dir.to_path_buf()]),
            project_dir: cwd,
            project_gate: None,
            tool_caches: None,
            read_masks: ReadMasks {
                credentials: credential_paths(&homes(&[])),
                ..ReadMasks::none()
            },
            secrets: Default::default(),
        };
        let catalog = discover(&executor, &[dir.to_path_buf()], &config).await;
        let problems = catalog
            .problems()
            .iter()
            .map(|problem| format!("{}: {}", problem.path.display(), problem.message()))
            .collect();
        let toolbox = Toolbox {
            executor,
            catalog,
            config,
            policy: Policy::allow_all(),
        };
        Ok((toolbox, problems))
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
        let envelope = invoke_named(
            &self.executor,
            &self.catalog,
            name,
            arguments,
            &self.config,
            &self.policy,
        )
        .await?;
        Ok(envelope)
    }
}

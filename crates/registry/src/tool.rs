//! A discovered tool: its name, what it tells the LLM, its policy annotations, where it lives and how it is run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::formats::annotations::Annotations;
use crate::formats::declared_tests::TestCase;
use crate::formats::format::{Format, Runner};
use crate::layer::Layer;
use crate::name::ToolName;
use crate::sandbox::SandboxDeclaration;
use crate::schema::{InputSchema, OutputSchema};

/// The longest description a tool may have (UTF-8 bytes): every listing sends every
/// description, to every client.
pub(crate) const MAX_DESCRIPTION_BYTES: usize = 16 * 1024;

/// The parts a format's loader produces, from which a [`Tool`] is built.
#[derive(Debug)]
pub(crate) struct ToolParts {
    pub(crate) name: ToolName,
    pub(crate) description: String,
    pub(crate) input_schema: InputSchema,
    pub(crate) output_schema: Option<OutputSchema>,
    pub(crate) annotations: Annotations,
    pub(crate) requested_timeout: Option<Duration>,
    /// A Kodelet tool whose `config` was not asked yet: `requested_timeout` is not known.
    pub(crate) config_pending: bool,
    pub(crate) sandbox: SandboxDeclaration,
    pub(crate) path: PathBuf,
    pub(crate) source: PathBuf,
    pub(crate) layer: Layer,
    pub(crate) runner: Runner,
    pub(crate) tests: Vec<TestCase>,
    /// The executable declared `"env_arguments": true` (manifests always get them).
    pub(crate) env_arguments: bool,
}

/// A tool that passed discovery and validation and can be invoked.
#[derive(Debug, Clone)]
pub struct Tool {
    name: ToolName,
    description: String,
    input_schema: InputSchema,
    output_schema: Option<OutputSchema>,
    annotations: Annotations,
    requested_timeout: Option<Duration>,
    config_pending: bool,
    sandbox: SandboxDeclaration,
    path: PathBuf,
    source: PathBuf,
    layer: Layer,
    runner: Runner,
    tests: Vec<TestCase>,
    env_arguments: bool,
    generated: bool,
}

/// The directory, beside the tools it holds, of the generator's history of generated tools;
/// one ref `refs/tools/<name>` per tool it registered.
pub const GENERATED_HISTORY_DIR: &str = ".history.git";

/// Whether the tool `name` at `path` was registered by toolsmith's generator: the history
/// beside it (`<dir>/.history.git`) holds a ref for that name, loose or packed. A hand-written
/// tool has none (the generator writes the ref before its file goes live, and nothing else
/// writes one).
pub fn is_generated(path: &Path, name: &ToolName) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    let history = dir.join(GENERATED_HISTORY_DIR);
    let reference = format!("refs/tools/{}", name.as_str());
    if history.join(&reference).is_file() {
        return true;
    }
    std::fs::read_to_string(history.join("packed-refs")).is_ok_and(|packed| {
        packed.lines().any(|line| {
            line.split_once(' ')
                .is_some_and(|(_, name)| name == reference)
        })
    })
}

impl Tool {
    pub(crate) fn from_parts(parts: ToolParts) -> Tool {
        let generated = is_generated(&parts.path, &parts.name);
        Tool {
            name: parts.name,
            description: parts.description,
            input_schema: parts.input_schema,
            output_schema: parts.output_schema,
            annotations: parts.annotations,
            requested_timeout: parts.requested_timeout,
            config_pending: parts.config_pending,
            sandbox: parts.sandbox,
            path: parts.path,
            source: parts.source,
            layer: parts.layer,
            runner: parts.runner,
            generated,
            tests: parts.tests,
            env_arguments: parts.env_arguments,
        }
    }

    /// True when toolsmith's generator registered the tool ([`is_generated`]): the operator's
    /// `[tools.NAME]` grants are for the tool they meant, so a generated tool gets none of
    /// them, whatever its name ([`RunConfig::call_config`](crate::RunConfig::call_config)).
    pub fn generated(&self) -> bool {
        self.generated
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

    /// The schema its JSON result must meet, when it declares one.
    pub fn output_schema(&self) -> Option<&OutputSchema> {
        self.output_schema.as_ref()
    }

    /// What it declares for policy and agents.
    pub fn annotations(&self) -> &Annotations {
        &self.annotations
    }

    /// The timeout the tool asks for, which the operator's `max_timeout` caps.
    ///
    /// `None` also while [`config_pending`](Tool::config_pending): a Kodelet tool's `config` is
    /// asked at its first call, not when it is listed.
    pub fn requested_timeout(&self) -> Option<Duration> {
        self.requested_timeout
    }

    /// True for a Kodelet tool whose optional `config` (the timeout it requests) has not been
    /// asked yet: [`discover_one`](crate::discovery::discover::discover_one) and a
    /// [`Call`](crate::front::Call) ask it, through the live registry's cache when given one.
    pub fn config_pending(&self) -> bool {
        self.config_pending
    }

    /// This tool with its `config` answered: `requested` is the timeout it asks for.
    pub(crate) fn with_requested_timeout(&self, requested: Option<Duration>) -> Tool {
        Tool {
            requested_timeout: requested,
            config_pending: false,
            ..self.clone()
        }
    }

    /// The sandbox the tool declares for itself, which can only tighten the operator's.
    pub fn sandbox(&self) -> &SandboxDeclaration {
        &self.sandbox
    }

    /// This tool as a generated one (see [`Tool::generated`]): the generator's staged and
    /// restored files are generated tools before their history says so, and get the
    /// network of generated tools (`[generator] network`), never a `[tools.NAME]` grant.
    pub fn as_generated(&self) -> Tool {
        Tool {
            generated: true,
            ..self.clone()
        }
    }

    /// This tool declaring `sandbox` in place of what its file declares: the declarations
    /// [`Toolsmith::learn`](crate::front::Toolsmith::learn) tries. The operator's grant still bounds every call.
    pub fn with_sandbox(&self, sandbox: SandboxDeclaration) -> Tool {
        Tool {
            sandbox,
            ..self.clone()
        }
    }

    /// The absolute path of the tool's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory it was discovered in.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The layer of the directory it was discovered in.
    pub fn layer(&self) -> Layer {
        self.layer
    }

    /// Its format.
    pub fn kind(&self) -> Format {
        self.runner.format()
    }

    /// The test cases it declares (`tests` in its description or frontmatter), for
    /// [`Toolsmith::run_tests`](crate::front::Toolsmith::run_tests) and `toolsmith test`.
    pub fn tests(&self) -> &[TestCase] {
        &self.tests
    }

    /// The shell a manifest names in `shell` (`bash` or `sh`); `None` for other formats and
    /// for manifests that name none (those run with bash, else sh).
    pub fn manifest_shell(&self) -> Option<&'static str> {
        self.runner
            .manifest()
            .and_then(|manifest| manifest.shell.map(|shell| shell.program()))
    }

    /// Whether the tool receives each argument out of band, in a `TOOLSMITH_ARG_<name>`
    /// variable (see docs/protocol.md): always for manifests, for executables that declare
    /// `"env_arguments": true`.
    pub fn env_arguments(&self) -> bool {
        self.env_arguments || self.runner.format() == Format::Manifest
    }

    pub(crate) fn runner(&self) -> &Runner {
        &self.runner
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use crate::name::ToolName;
    use crate::tool::{GENERATED_HISTORY_DIR, is_generated};

    #[test]
    fn a_tool_is_generated_when_the_history_beside_it_has_its_ref() {
        let dir = tempfile::tempdir().unwrap();
        let deploy = ToolName::new("deploy").unwrap();
        let other = ToolName::new("other").unwrap();
        let path = dir.path().join("deploy");
        assert!(!is_generated(&path, &deploy));
        let history = dir.path().join(GENERATED_HISTORY_DIR);
        fs::create_dir_all(history.join("refs/tools")).unwrap();
        fs::write(history.join("refs/tools/deploy"), "0".repeat(40) + "\n").unwrap();
        assert!(is_generated(&path, &deploy));
        assert!(!is_generated(&dir.path().join("other"), &other));
        // A packed ref counts as well; a name that merely ends like one does not.
        fs::write(
            history.join("packed-refs"),
            format!(
                "# pack-refs with: peeled\n{0} refs/tools/other\n{0} refs/tools/xdeploy\n",
                "1".repeat(40)
            ),
        )
        .unwrap();
        assert!(is_generated(&dir.path().join("other"), &other));
        let xdeploy = ToolName::new("deploy_x").unwrap();
        assert!(!is_generated(&dir.path().join("deploy_x"), &xdeploy));
    }
}

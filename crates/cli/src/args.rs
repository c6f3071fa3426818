//! The command line, as clap parses it: `Cli { command, global }` with one `XxxArgs` per subcommand.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use toolsmith_registry::Profile;

use crate::export::Provider;
use crate::units::{self, Cap};

/// Discover, validate and run custom tools for AI agent pipelines.
#[derive(Debug, Parser)]
#[command(
    name = "toolsmith",
    bin_name = "toolsmith",
    version,
    about,
    long_about = None,
    after_help = EXAMPLES_MAIN
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Commands,
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
}

/// Flags every subcommand accepts.
#[derive(Debug, Args)]
pub(crate) struct GlobalArgs {
    /// A directory to discover tools in; repeat it for several, later ones
    /// shadowing earlier ones. Replaces the default layers (system, user,
    /// project, `[discovery] dirs`): exactly these directories are read.
    #[arg(long = "tools-dir", value_name = "DIR", global = true)]
    pub(crate) tools_dir: Vec<PathBuf>,

    /// The project directory, whose `.toolsmith/` is read once trusted and where
    /// `filesystem = "project"` tools may write [env: TOOLSMITH_PROJECT] [default: the
    /// enclosing git work tree, else the current directory; never $HOME or / unless named].
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) project: Option<PathBuf>,

    /// The TOML config file, above the user's [default: ./.toolsmith/config.toml
    /// if it exists and the project is trusted].
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) config: Option<PathBuf>,

    /// Probe every tool instead of reusing the discovery cache (which is then
    /// neither read nor written).
    #[arg(long = "no-cache", global = true)]
    pub(crate) no_cache: bool,

    /// When to colour the output: `auto` colours a terminal only, and not
    /// when NO_COLOR is set (CLICOLOR_FORCE=1 forces it).
    #[arg(long, value_name = "WHEN", global = true, default_value = "auto")]
    pub(crate) color: clap::ColorChoice,

    /// How logs are written on stderr: `text`, or `json` (one JSON object per
    /// line: timestamp, level, target, fields) [env: TOOLSMITH_LOG_FORMAT] [default: text].
    #[arg(long, value_name = "FORMAT", global = true)]
    pub(crate) log_format: Option<crate::logging::LogFormat>,

    /// Print the resolved settings as JSON instead of running the command.
    #[arg(long, global = true, hide = true)]
    pub(crate) show_settings: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Commands {
    /// List the tools that may be called, grouped by directory.
    #[command(after_help = EXAMPLES_LIST)]
    List(ListArgs),
    /// Show one tool: its schema, annotations, where it lives, its effective
    /// limits and what policy says about it.
    #[command(after_help = EXAMPLES_SHOW)]
    Show(ShowArgs),
    /// Run every check discovery applies to tool files, one line each.
    #[command(after_help = EXAMPLES_VALIDATE)]
    Validate(ValidateArgs),
    /// Call a tool and print its result envelope.
    #[command(after_help = EXAMPLES_RUN)]
    Run(RunArgs),
    /// Print the tool definitions in one LLM API's exact shape (MCP, OpenAI,
    /// Anthropic, Gemini); a tool a provider cannot take is left out with a warning.
    #[command(after_help = EXAMPLES_EXPORT)]
    Export(ExportArgs),
    /// Check this machine and set-up: what the kernel allows, the tool
    /// directories and their problems, and the effective config, each with a fix.
    #[command(after_help = EXAMPLES_DOCTOR)]
    Doctor(DoctorArgs),
    /// Serve the tools over MCP: on stdin/stdout until stdin closes, or over HTTP with `--http`.
    #[command(after_help = EXAMPLES_SERVE)]
    Serve(ServeArgs),
    /// Print a shell completion script on stdout.
    #[command(after_help = EXAMPLES_COMPLETIONS)]
    Completions(CompletionsArgs),
    /// Write the man pages (`toolsmith.1` and one per subcommand) into a directory.
    ///
    /// Hidden: `cargo xtask install` and `cargo xtask man` run it on the binary they built, so
    /// the pages match that binary and xtask need not link the command line.
    #[command(hide = true)]
    Man(ManArgs),
    /// Mint the bearer token of `serve --http`.
    #[command(subcommand, after_help = EXAMPLES_TOKEN)]
    Token(TokenCommand),
    /// Generate a tool from a custom_tool request: render it, test it in the
    /// sandbox, and register it only when every check passes.
    #[command(after_help = EXAMPLES_GENERATE)]
    Generate(GenerateArgs),
    /// Write a working skeleton of a new tool, for a human to complete.
    #[command(after_help = EXAMPLES_NEW)]
    New(NewArgs),
    /// Run the test cases tools declare (`tests`), one line per case.
    #[command(after_help = EXAMPLES_TEST)]
    Test(TestArgs),
    /// Learn the narrowest sandbox declaration under which a tool's tests pass.
    ///
    /// Runs the declared tests in a recording sandbox (the operator's grant, public
    /// destinations through the egress proxy, which records them), then again under the
    /// narrowest declaration the record allows, and prints it.
    #[command(after_help = EXAMPLES_LEARN)]
    Learn(LearnArgs),
    /// Fetch the dependencies of uv and npx tools into their caches, once.
    ///
    /// A tool started by a package runner (`uv run --script`, `npx`) is prepared with the
    /// network; its probes and calls then run offline.
    #[command(after_help = EXAMPLES_PREPARE)]
    Prepare(PrepareArgs),
    /// List the recorded versions of a generated tool.
    #[command(after_help = EXAMPLES_HISTORY)]
    History(HistoryArgs),
    /// Restore a recorded version of a generated tool, as a new version.
    #[command(after_help = EXAMPLES_ROLLBACK)]
    Rollback(RollbackArgs),
    /// Trust a project: toolsmith then reads its tools and its config (until
    /// the config changes), or list the trusted directories.
    #[command(after_help = EXAMPLES_TRUST)]
    Trust(TrustArgs),
    /// Stop trusting a project: its tools and config are skipped again.
    #[command(after_help = EXAMPLES_UNTRUST)]
    Untrust(UntrustArgs),
}

const EXAMPLES_PREPARE: &str = "\
Examples:
  toolsmith prepare                                 every tool that needs it
  toolsmith prepare todo_write --json

A uv script with a `# /// script` block is prepared with `uv sync --script`
(its own code does not run); another package-runner script by running its
probe. This one step has the host's network (the package index it needs is
printed) until toolsmith has per-host egress; everything else of the probes'
sandbox applies. See docs/operators.md, \"Tools with dependencies\".";

const EXAMPLES_TRUST: &str = "\
Examples:
  toolsmith trust                                   the project of the current directory
  toolsmith trust ~/src/app
  toolsmith trust --list --json

A project's tools (.toolsmith/tools, and the peers' directories) and its
.toolsmith/config.toml are skipped until you trust it; a changed config must
be trusted again. The user config's `[trust] paths` trusts directories ahead,
for CI. See docs/security.md, \"Project trust\".";

const EXAMPLES_UNTRUST: &str = "\
Examples:
  toolsmith untrust                                 the project of the current directory
  toolsmith untrust ~/src/app";

const EXAMPLES_GENERATE: &str = "\
Examples:
  toolsmith generate --print-schema                 the request's JSON Schema
  toolsmith generate --request request.json         render, test, register; prints the report
  cat request.json | toolsmith generate --request -

Exit status: 0 when registered or scaffolded, 1 when rejected, 2 for bad usage.";

const EXAMPLES_NEW: &str = "\
Examples:
  toolsmith new fetch_title --lang python --description 'Fetch a page title' --param url:string:required:'The page URL'
  toolsmith new count_lines --lang bash --param path:string:required --dir ./tools";

const EXAMPLES_LEARN: &str = "\
Examples:
  toolsmith learn fetch_page                        the declaration, one line per axis
  toolsmith learn fetch_page --json                 {\"sandbox\": {...}} to paste into the tool

Exit status: 0 when a declaration was learned, 1 when a test fails even while recording
(or under every declaration tried), 2 for bad usage.";

const EXAMPLES_TEST: &str = "\
Examples:
  toolsmith test                                    every tool that declares tests
  toolsmith test word_count --json

Exit status: 0 when every case passes, 1 when one fails, 2 for bad usage.";

const EXAMPLES_HISTORY: &str = "\
Examples:
  toolsmith history fetch_title
  toolsmith history fetch_title --json";

const EXAMPLES_ROLLBACK: &str = "\
Examples:
  toolsmith rollback fetch_title                    restore the version before the latest
  toolsmith rollback fetch_title --to 1";

const EXAMPLES_MAIN: &str = "\
Examples:
  toolsmith list                                    the tools of the default directories
  toolsmith --tools-dir examples/tools list         the tools of one directory only
  toolsmith run hello --input '{\"name\": \"Ada\"}'       call a tool, print its envelope
  toolsmith doctor                                  what this machine allows, what is wrong

Each subcommand has examples: toolsmith help SUBCOMMAND.
Docs: docs/README.md (tool authors, operators, agent integration, migration).";

const EXAMPLES_LIST: &str = "\
Examples:
  toolsmith list
  toolsmith --tools-dir examples/tools list --all
  toolsmith list --profile plan                     only the read-only tools
  toolsmith list --json | jq -r '.tools[].name'";

const EXAMPLES_SHOW: &str = "\
Examples:
  toolsmith --tools-dir examples/tools show hello
  toolsmith show custom_tool_hello --json
  toolsmith show deploy --profile unattended        would an unattended agent get it?";

const EXAMPLES_VALIDATE: &str = "\
Examples:
  toolsmith validate                                every file of the tool directories
  toolsmith validate ./my-tool                      one file, by path
  toolsmith --tools-dir examples/tools validate hello --json";

const EXAMPLES_RUN: &str = "\
Examples:
  toolsmith run hello --input '{\"name\": \"Ada\"}'
  echo '{\"name\": \"Ada\"}' | toolsmith run hello --input -
  toolsmith run word_count --input @args.json --timeout 5s --memory 256MiB

Exit status: 0 when tool_success is true, 1 when it is false, 2 for bad usage.";

const EXAMPLES_EXPORT: &str = "\
Examples:
  toolsmith export --format openai > tools.json
  toolsmith export --format anthropic --strict
  toolsmith export --format mcp --prefix ''";

const EXAMPLES_DOCTOR: &str = "\
Examples:
  toolsmith doctor
  toolsmith --tools-dir examples/tools doctor --json

Exit status: 0 when no problem was found, 1 otherwise.";

const EXAMPLES_SERVE: &str = "\
Examples:
  toolsmith serve
  toolsmith serve --profile plan --prefix ''
  toolsmith serve --http 127.0.0.1:8848
  toolsmith serve --http 0.0.0.0:8848 --token-file token --tls-cert cert.pem --tls-key key.pem

Claude Code: claude mcp add toolsmith -- toolsmith serve
See docs/agents.md for Codex, Cursor and goose.";

const EXAMPLES_TOKEN: &str = "\
Examples:
  (umask 077; toolsmith token new > ~/.config/toolsmith/token)
  toolsmith serve --http 0.0.0.0:8848 --token-file ~/.config/toolsmith/token";

const EXAMPLES_COMPLETIONS: &str = "\
Examples:
  toolsmith completions bash > ~/.local/share/bash-completion/completions/toolsmith
  toolsmith completions zsh > ~/.zfunc/_toolsmith
  toolsmith completions fish > ~/.config/fish/completions/toolsmith.fish";

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// The directory to write the pages into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Print a fresh random token (256 bits from the OS, in hex) on stdout.
    New,
}

#[derive(Debug, Args)]
pub(crate) struct GenerateArgs {
    /// The request: a JSON file, or `-` for stdin.
    #[arg(long, value_name = "FILE|-", required_unless_present = "print_schema")]
    pub(crate) request: Option<PathBuf>,

    /// Print the request's JSON Schema instead.
    #[arg(long, conflicts_with = "request")]
    pub(crate) print_schema: bool,

    /// Print the report as JSON, instead of one line per check.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The language of a new tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LanguageArg {
    /// A Python 3 executable (`description`/`run` protocol).
    Python,
    /// A bash executable (`description`/`run` protocol; bash and coreutils only).
    Bash,
    /// A Nanocoder-style markdown manifest with a shell body.
    Manifest,
}

#[derive(Debug, Args)]
pub(crate) struct NewArgs {
    /// The tool's name (snake_case, verb_noun).
    pub(crate) name: String,

    /// The language.
    #[arg(long, value_enum)]
    pub(crate) lang: LanguageArg,

    /// What the tool does.
    #[arg(long)]
    pub(crate) description: Option<String>,

    /// A parameter, `NAME:TYPE[:required][:DESCRIPTION]` (TYPE: string, number, integer,
    /// boolean, array, object); repeat for several.
    #[arg(long = "param", value_name = "NAME:TYPE[:required][:DESCRIPTION]")]
    pub(crate) params: Vec<String>,

    /// The directory to write into [default: the generator's tools directory,
    /// `<project>/.toolsmith/tools` or `[generator] tools_dir`].
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct TestArgs {
    /// The tool to test [default: every tool that declares tests].
    pub(crate) name: Option<String>,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct LearnArgs {
    /// The tool whose declared tests to learn from.
    pub(crate) name: String,

    /// Print `{"sandbox": {...}}`, ready to paste into the tool's declaration.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// The generated tool.
    pub(crate) name: String,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RollbackArgs {
    /// The generated tool.
    pub(crate) name: String,

    /// The version to restore [default: the one before the latest].
    #[arg(long, value_name = "VERSION")]
    pub(crate) to: Option<u32>,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A policy profile as a flag gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProfileArg {
    /// Only tools that declare themselves read-only.
    Plan,
    /// Only tools that never need approval.
    Unattended,
    /// No profile, even if the config or environment sets one.
    None,
}

impl ProfileArg {
    pub(crate) fn profile(self) -> Option<Profile> {
        match self {
            ProfileArg::Plan => Some(Profile::Plan),
            ProfileArg::Unattended => Some(Profile::Unattended),
            ProfileArg::None => None,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Print JSON: {"tools": [...], "problems": [...], "shadowed": [...]}, and
    /// with --all also "denied".
    #[arg(long)]
    pub(crate) json: bool,

    /// Also show the tools that policy denies (with the reason), shadowed
    /// tools and the files that failed to load.
    #[arg(long)]
    pub(crate) all: bool,

    /// The policy profile [env: TOOLSMITH_PROFILE] [default: `[policy] profile`].
    #[arg(long, value_name = "PROFILE")]
    pub(crate) profile: Option<ProfileArg>,
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The API whose shape to print.
    #[arg(long, value_enum)]
    pub(crate) format: Provider,

    /// Use the provider's strict schema mode (OpenAI, Anthropic) for every tool whose schema
    /// allows it; the others are exported non-strict, with a warning saying why.
    #[arg(long)]
    pub(crate) strict: bool,

    /// Put this before every tool name ('' for none).
    #[arg(long, default_value = toolsmith_registry::EXPOSED_PREFIX)]
    pub(crate) prefix: String,

    /// The policy profile [env: TOOLSMITH_PROFILE] [default: `[policy] profile`].
    #[arg(long, value_name = "PROFILE")]
    pub(crate) profile: Option<ProfileArg>,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The tool, as `hello` or `custom_tool_hello`.
    pub(crate) name: String,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,

    /// The policy profile the verdict is given for.
    #[arg(long, value_name = "PROFILE")]
    pub(crate) profile: Option<ProfileArg>,
}

#[derive(Debug, Args)]
pub(crate) struct PrepareArgs {
    /// The tool, as `todo_write` or `custom_tool_todo_write` [default: every tool that
    /// needs preparing].
    pub(crate) name: Option<String>,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// Tool files (a path, i.e. containing `/` or naming an existing file) or
    /// tool names looked up in the tool directories [default: every file in
    /// the tool directories].
    #[arg(value_name = "PATH|NAME")]
    pub(crate) targets: Vec<String>,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The tool, as `hello` or `custom_tool_hello`.
    pub(crate) name: String,

    /// The arguments as JSON, `-` to read them from stdin, or `@FILE` to read them from a file.
    #[arg(long, value_name = "JSON|-|@FILE", default_value = "{}")]
    pub(crate) input: String,

    /// Wall-clock timeout, e.g. `30s`, `500ms`, `2m`.
    #[arg(long, value_name = "DUR", value_parser = duration_arg)]
    pub(crate) timeout: Option<Duration>,

    /// CPU time limit, e.g. `10s`, or `unlimited`.
    #[arg(long, value_name = "DUR", value_parser = duration_cap_arg)]
    pub(crate) cpu: Option<Cap<Duration>>,

    /// Memory limit, e.g. `512MiB`, `1GiB`, or `unlimited`.
    #[arg(long, value_name = "SIZE", value_parser = size_cap_arg)]
    pub(crate) memory: Option<Cap<u64>>,

    /// Bytes kept per output stream, e.g. `64KiB`.
    #[arg(long = "max-output", value_name = "SIZE", value_parser = size_arg)]
    pub(crate) max_output: Option<u64>,

    /// Size of the private TMPDIR (a tmpfs) under `filesystem = "project"` or
    /// `"read-only"`, e.g. `64MiB`, or `unlimited` (half of RAM).
    #[arg(long = "tmp-size", value_name = "SIZE", value_parser = size_cap_arg)]
    pub(crate) tmp_size: Option<Cap<u64>>,

    /// The directory the tool runs in [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,

    /// The policy profile: a tool it denies is POLICY_DENIED and is not run
    /// [env: TOOLSMITH_PROFILE] [default: `[policy] profile`].
    #[arg(long, value_name = "PROFILE")]
    pub(crate) profile: Option<ProfileArg>,

    /// Accepted for symmetry with other subcommands: the envelope is always JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct TrustArgs {
    /// The directory to trust [default: the project of the current directory:
    /// the enclosing git work tree, else the current directory].
    #[arg(value_name = "DIR", conflicts_with = "list")]
    pub(crate) dir: Option<PathBuf>,

    /// List the trusted directories instead: those recorded, with whether
    /// their config changed since, and those of `[trust] paths`.
    #[arg(long)]
    pub(crate) list: bool,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UntrustArgs {
    /// The directory to stop trusting [default: the project of the current
    /// directory].
    #[arg(value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,

    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The policy profile: the tools it denies are not listed, and calling
    /// one is POLICY_DENIED [env: TOOLSMITH_PROFILE] [default: `[policy] profile`].
    #[arg(long, value_name = "PROFILE")]
    pub(crate) profile: Option<ProfileArg>,

    /// What goes before each tool's name in the MCP listing; may be empty.
    #[arg(long, value_name = "PREFIX", default_value = toolsmith_registry::EXPOSED_PREFIX, value_parser = prefix_arg)]
    pub(crate) prefix: String,

    /// Scan the tool directories every DUR (e.g. `1s`) instead of waiting for the kernel's
    /// file events, which never come for what another machine writes on a network
    /// filesystem: for replicas on several machines sharing a tools directory over NFS.
    #[arg(long, value_name = "DUR", value_parser = poll_interval_arg)]
    pub(crate) poll_interval: Option<Duration>,

    /// Serve MCP over Streamable HTTP on this address (e.g. `127.0.0.1:8848`),
    /// at `/mcp`, instead of on stdin/stdout. A non-loopback address needs a token.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<std::net::SocketAddr>,

    /// The file whose first line is the bearer token clients must send
    /// (`Authorization: Bearer TOKEN`) [env: TOOLSMITH_TOKEN].
    #[arg(long, value_name = "FILE", requires = "http")]
    pub(crate) token_file: Option<PathBuf>,

    /// The TLS certificate chain (PEM) to serve HTTPS with; needs `--tls-key`.
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub(crate) tls_cert: Option<PathBuf>,

    /// The TLS private key (PEM) of `--tls-cert`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,

    /// A `Host` the server answers to besides loopback names and the bound
    /// address (e.g. `tools.example.com` or `tools.example.com:8848`); repeat it for several.
    #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
    pub(crate) allow_hosts: Vec<String>,

    /// A browser `Origin` allowed to call (e.g. `https://app.example.com:443`);
    /// repeat it for several. A request with any other `Origin` is refused (403).
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub(crate) allow_origins: Vec<String>,

    /// The largest request body accepted over HTTP (larger: 413).
    #[arg(long, value_name = "SIZE", default_value = "1MiB", value_parser = size_arg, requires = "http")]
    pub(crate) max_body: u64,

    /// On SIGTERM or SIGINT, how long the calls running may take to finish (no new call is
    /// taken meanwhile); those still running then are cancelled and their processes killed.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = duration_arg, requires = "http")]
    pub(crate) shutdown_grace: Duration,

    /// At most this many calls at once from one client (IP address); a call over it is
    /// refused with a JSON-RPC error saying so (it never starts), `0` for no limit.
    #[arg(long, value_name = "N", default_value_t = 32, requires = "http")]
    pub(crate) max_calls_per_client: usize,

    /// At most this many calls per second from one client (IP address), in bursts of up to
    /// as many; a call over it is refused with a JSON-RPC error that says when to send it
    /// again (it never starts), `0` for no limit.
    #[arg(long, value_name = "N", default_value_t = 50, requires = "http")]
    pub(crate) max_call_rate: u32,

    /// At most this many connections open at once; when all are open, the one idle longest
    /// is closed for a new one (with none idle, the new one is). Cut to what the open-file
    /// limit leaves, which the server raises to its hard limit at start.
    #[arg(long, value_name = "N", default_value_t = 1024, requires = "http")]
    pub(crate) max_connections: usize,

    /// At most this many connections open at once from one client (IP address); more are
    /// closed at once.
    #[arg(long, value_name = "N", default_value_t = 256, requires = "http")]
    pub(crate) max_connections_per_client: usize,

    /// At most this many `/mcp` requests in flight at once from one client (IP address),
    /// open SSE streams included; more are answered 429.
    #[arg(long, value_name = "N", default_value_t = 128, requires = "http")]
    pub(crate) max_streams_per_client: usize,

    /// At most this many legacy sessions (`Mcp-Session-Id`) in all; over it, the least
    /// recently used one is closed.
    #[arg(long, value_name = "N", default_value_t = 1024, requires = "http")]
    pub(crate) max_sessions: usize,

    /// At most this many legacy sessions of one client (IP address); over it, its least
    /// recently used one is closed.
    #[arg(long, value_name = "N", default_value_t = 32, requires = "http")]
    pub(crate) max_sessions_per_client: usize,

    /// A legacy session unused for this long is closed.
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = duration_arg, requires = "http")]
    pub(crate) session_idle_timeout: Duration,

    /// A connection with no request in flight for this long is closed (also one that never
    /// finishes sending a request).
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = duration_arg, requires = "http")]
    pub(crate) idle_timeout: Duration,

    /// The time a client has to send a request's headers (and a TLS handshake), once begun.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = duration_arg, requires = "http")]
    pub(crate) header_timeout: Duration,

    /// The time a client has to send a request's body (408 otherwise).
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = duration_arg, requires = "http")]
    pub(crate) body_timeout: Duration,
}

/// The longest `--prefix`: with the longest tool name it stays within MCP's 128 characters.
const MAX_PREFIX_LEN: usize = 64;

/// A `--prefix` error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrefixError {
    #[error(
        "a prefix may only contain ASCII letters, digits, `_`, `-` and `.` (MCP's tool name characters)"
    )]
    Characters,
    #[error("a prefix may be at most {MAX_PREFIX_LEN} characters long")]
    TooLong,
}

fn prefix_arg(text: &str) -> Result<String, PrefixError> {
    if !text
        .chars()
        .all(|character| character.is_ascii_alphanumeric() || matches!(character, '_' | '-' | '.'))
    {
        return Err(PrefixError::Characters);
    }
    if text.len() > MAX_PREFIX_LEN {
        return Err(PrefixError::TooLong);
    }
    Ok(text.to_owned())
}

fn duration_arg(text: &str) -> Result<Duration, units::UnitError> {
    units::parse_duration(text)
}

/// The shortest `--poll-interval`: each scan reads every tool file's metadata.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);

fn poll_interval_arg(text: &str) -> Result<Duration, String> {
    let interval = units::parse_duration(text).map_err(|error| error.to_string())?;
    if interval < MIN_POLL_INTERVAL {
        return Err(format!(
            "expected at least {}ms: each scan reads every tool file's metadata",
            MIN_POLL_INTERVAL.as_millis()
        ));
    }
    Ok(interval)
}

fn duration_cap_arg(text: &str) -> Result<Cap<Duration>, units::UnitError> {
    units::parse_cap(text, units::parse_duration)
}

fn size_arg(text: &str) -> Result<u64, units::UnitError> {
    units::parse_size(text)
}

fn size_cap_arg(text: &str) -> Result<Cap<u64>, units::UnitError> {
    units::parse_cap(text, units::parse_size)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use crate::args::Cli;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Issue 14: the help said the report "is JSON already", but without `--json` it is text.
    #[test]
    fn generate_json_flag_says_what_it_changes() {
        let mut command = Cli::command();
        let generate = command
            .find_subcommand_mut("generate")
            .expect("generate is a subcommand");
        let help = generate.render_long_help().to_string();
        assert!(help.contains("instead of one line per check"), "{help}");
        assert!(!help.contains("JSON already"), "{help}");
    }
}

//! Every environment variable toolsmith reads, as documented constants on one type.

/// The environment variables toolsmith reads. Each one is documented here and
/// nowhere else: `cargo xtask codegen` writes `docs/environment.md` from these doc
/// comments (with the executor's own `*_VAR` constants), and its check fails when that
/// file is stale.
#[derive(Debug)]
pub struct EnvVars;

impl EnvVars {
    /// The user's home directory; the default user tool directory is
    /// `$HOME/.config/toolsmith/tools`.
    pub const HOME: &'static str = "HOME";

    /// toolsmith's user directory, replacing `~/.config/toolsmith`: user tools
    /// are found in `$TOOLSMITH_HOME/tools`, and the user config is
    /// `$TOOLSMITH_HOME/config.toml`.
    pub const TOOLSMITH_HOME: &'static str = "TOOLSMITH_HOME";

    /// The project directory, like `--project` (which wins): its `.toolsmith/` layer is read
    /// once trusted, and `filesystem = "project"` tools may write below it. Default: the git
    /// work tree enclosing the current directory, else the current directory (never `$HOME`,
    /// `/` or an ancestor of `$HOME` unless named here or with `--project`).
    pub const TOOLSMITH_PROJECT: &'static str = "TOOLSMITH_PROJECT";

    /// The configuration file to read, like `--config` (which wins).
    pub const TOOLSMITH_CONFIG: &'static str = "TOOLSMITH_CONFIG";

    /// A `tracing` filter for the logs written to stderr, e.g. `debug` or
    /// `toolsmith_registry=trace`. Default: `warn`.
    pub const TOOLSMITH_LOG: &'static str = "TOOLSMITH_LOG";

    /// How logs are written on stderr, like `--log-format` (which wins): `text`
    /// (the default) or `json`, one JSON object per line.
    pub const TOOLSMITH_LOG_FORMAT: &'static str = "TOOLSMITH_LOG_FORMAT";

    /// A hosts-format file (`address name...` per line) from which toolsmith's egress proxy
    /// resolves the names tools ask for, instead of the system resolver; read again whenever it changes.
    /// For tests and air-gapped hosts.
    pub const TOOLSMITH_EGRESS_HOSTS: &'static str = "TOOLSMITH_EGRESS_HOSTS";

    /// The containment backend: `auto`, `cgroup`, `pidns`, `subreaper` or
    /// `pgroup`. Overrides `[executor] backend`.
    pub const TOOLSMITH_BACKEND: &'static str = "TOOLSMITH_BACKEND";

    /// At most this many tool processes at once. Overrides `[executor] max_concurrent`.
    pub const TOOLSMITH_MAX_CONCURRENT: &'static str = "TOOLSMITH_MAX_CONCURRENT";

    /// The wall-clock timeout of a call, e.g. `30s`. Overrides `[limits] timeout`.
    pub const TOOLSMITH_TIMEOUT: &'static str = "TOOLSMITH_TIMEOUT";

    /// The CPU time limit of a call, e.g. `10s` or `unlimited`. Overrides `[limits] cpu`.
    pub const TOOLSMITH_CPU: &'static str = "TOOLSMITH_CPU";

    /// The memory limit of a call, e.g. `512MiB` or `unlimited`. Overrides `[limits] memory`.
    pub const TOOLSMITH_MEMORY: &'static str = "TOOLSMITH_MEMORY";

    /// Bytes kept per output stream of a call, e.g. `1MiB`. Overrides `[limits] max_output`.
    pub const TOOLSMITH_MAX_OUTPUT: &'static str = "TOOLSMITH_MAX_OUTPUT";

    /// The policy profile: `plan` (read-only tools only), `unattended` (no
    /// tool that needs approval) or `none`. Overrides `[policy] profile`;
    /// `--profile` wins over it.
    pub const TOOLSMITH_PROFILE: &'static str = "TOOLSMITH_PROFILE";

    /// The bearer token `serve --http` requires of clients, when `--token-file`
    /// is not given. It is read once at start and dropped from toolsmith's
    /// environment: no tool receives it.
    pub const TOOLSMITH_TOKEN: &'static str = "TOOLSMITH_TOKEN";

    /// The base directory of user caches (XDG); the discovery cache is
    /// `$XDG_CACHE_HOME/toolsmith/discovery.json`, default `~/.cache/toolsmith/`.
    /// A relative value is ignored, as the XDG specification asks.
    pub const XDG_CACHE_HOME: &'static str = "XDG_CACHE_HOME";

    /// The base directory of user state (XDG); the projects the user trusted are
    /// recorded in `$XDG_STATE_HOME/toolsmith/trust.json`, default
    /// `~/.local/state/toolsmith/`. A relative value is ignored.
    pub const XDG_STATE_HOME: &'static str = "XDG_STATE_HOME";

    /// When set and not empty, `--color auto` (the default) colours nothing.
    pub const NO_COLOR: &'static str = "NO_COLOR";

    /// When set, not empty and not `0`, `--color auto` colours even a pipe.
    pub const CLICOLOR_FORCE: &'static str = "CLICOLOR_FORCE";

    /// The terminal's type: `dumb` makes `--color auto` colour nothing, even on a terminal.
    pub const TERM: &'static str = "TERM";
}

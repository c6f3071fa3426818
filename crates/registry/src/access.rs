//! The two access axes of a sandbox, network and filesystem, in the words of configuration and
//! declarations (`"none"`, `"any"`, a list of destinations; `"full"`, `"project"`,
//! `"read-only"`, a list of writable paths), and how a tool's declaration narrows the
//! operator's grant on each axis.
//!
//! On each axis a declared level (`"any"`, `"full"`) only tightens, as it always did; a
//! declared list is a need: what the operator grants of it applies, and what it does not grant
//! is a [`SandboxDenial`] naming the line to add, so the call fails with `POLICY_DENIED`
//! instead of running without what it needs.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde_json::Value;

use crate::grant::{
    DenialKind, NetworkTarget, SandboxDenial, intersect_roots, is_plain_absolute, path_covers,
    toml_string,
};

/// Network access of a call, as the operator writes it (and as a call ends up with).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NetworkSetting {
    /// `"any"` (alias `"allow"`): the host's network, as the operator wrote it.
    Allow,
    /// `"none"` (alias `"deny"`): no network; the call fails when the kernel cannot provide a
    /// network namespace.
    Deny,
    /// No network when the kernel can provide a network namespace, else the host's.
    DenyIfPossible,
    /// A list: only these destinations, through toolsmith's egress proxy.
    Only(Vec<NetworkTarget>),
    /// The default profile's grant: what each tool declares, public addresses only, through
    /// the egress proxy; nothing for a tool that declares nothing.
    Declared,
    /// Every public destination through the egress proxy: a declared `"any"` under
    /// [`NetworkSetting::Declared`].
    AnyPublic,
}

impl NetworkSetting {
    /// Every value, as written in configuration.
    pub const VALUES: &'static str =
        "none, any, deny-if-possible (or the aliases deny and allow), or a list of destinations";

    /// The value as configuration writes it: a string, or a list of strings.
    pub fn to_json(&self) -> Value {
        match self {
            NetworkSetting::Only(targets) => {
                Value::Array(targets.iter().map(|t| Value::from(t.to_string())).collect())
            }
            other => Value::from(other.word()),
        }
    }

    fn word(&self) -> &'static str {
        match self {
            NetworkSetting::Allow => "any",
            NetworkSetting::Deny => "none",
            NetworkSetting::DenyIfPossible => "deny-if-possible",
            NetworkSetting::Only(_) => "list",
            NetworkSetting::Declared => "declared",
            NetworkSetting::AnyPublic => "any-public",
        }
    }

    /// Parses a string (see [`FromStr`]) or a list of destinations.
    pub fn from_json(value: &Value) -> Result<NetworkSetting, UnknownSetting> {
        match value {
            Value::String(text) => text.parse(),
            Value::Array(entries) => entries
                .iter()
                .map(|entry| {
                    entry
                        .as_str()
                        .ok_or_else(|| unknown("network", entry.to_string()))
                        .and_then(|text| {
                            NetworkTarget::parse(text).map_err(|error| UnknownSetting {
                                key: "network",
                                value: text.to_owned(),
                                expected: NetworkSetting::VALUES,
                                detail: Some(error.to_string()),
                            })
                        })
                })
                .collect::<Result<_, _>>()
                .map(NetworkSetting::Only),
            other => Err(unknown("network", other.to_string())),
        }
    }

    /// How strict the setting is, for the loosening checks of project configs: 0 the host's
    /// network, 1 every public destination, 2 a list, 3 no network where possible, 4 none.
    pub fn strictness(&self) -> u8 {
        match self {
            NetworkSetting::Allow => 0,
            NetworkSetting::AnyPublic => 1,
            NetworkSetting::Declared | NetworkSetting::Only(_) => 2,
            NetworkSetting::DenyIfPossible => 3,
            NetworkSetting::Deny => 4,
        }
    }

    /// True when `self` (a project's word) grants nothing `user` (the user's) does not.
    pub fn within(&self, user: &NetworkSetting) -> bool {
        match (self, user) {
            (NetworkSetting::Only(project), NetworkSetting::Only(user)) => project
                .iter()
                .all(|need| user.iter().any(|granted| granted.covers(need))),
            (NetworkSetting::Only(_), NetworkSetting::Declared) => false,
            _ => self.strictness() >= user.strictness(),
        }
    }
}

fn unknown(key: &'static str, value: String) -> UnknownSetting {
    UnknownSetting {
        key,
        value,
        expected: match key {
            "network" => NetworkSetting::VALUES,
            _ => FilesystemSetting::VALUES,
        },
        detail: None,
    }
}

impl FromStr for NetworkSetting {
    type Err = UnknownSetting;

    fn from_str(text: &str) -> Result<NetworkSetting, UnknownSetting> {
        match text {
            "any" | "allow" => Ok(NetworkSetting::Allow),
            "none" | "deny" => Ok(NetworkSetting::Deny),
            "deny-if-possible" => Ok(NetworkSetting::DenyIfPossible),
            _ => Err(unknown("network", text.to_owned())),
        }
    }
}

impl fmt::Display for NetworkSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkSetting::Only(_) => write!(f, "{}", self.to_json()),
            other => f.write_str(other.word()),
        }
    }
}

/// Where a call may write, as the operator writes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FilesystemSetting {
    /// Wherever the user may.
    Full,
    /// Only below the project directory and a private temporary directory.
    Project,
    /// Only in a private temporary directory.
    ReadOnly,
    /// As `project` when the kernel has Landlock, else `full`.
    ProjectIfPossible,
    /// As `read-only` when the kernel has Landlock, else `full`.
    ReadOnlyIfPossible,
    /// Only below these absolute paths and a private temporary directory (Landlock required).
    Paths(Vec<PathBuf>),
}

impl FilesystemSetting {
    /// Every value, as written in configuration.
    pub const VALUES: &'static str = "full, project, read-only, project-if-possible, read-only-if-possible, or a list of absolute writable paths";

    fn word(&self) -> &'static str {
        match self {
            FilesystemSetting::Full => "full",
            FilesystemSetting::Project => "project",
            FilesystemSetting::ReadOnly => "read-only",
            FilesystemSetting::ProjectIfPossible => "project-if-possible",
            FilesystemSetting::ReadOnlyIfPossible => "read-only-if-possible",
            FilesystemSetting::Paths(_) => "paths",
        }
    }

    /// The value as configuration writes it: a string, or a list of paths.
    pub fn to_json(&self) -> Value {
        match self {
            FilesystemSetting::Paths(paths) => Value::Array(
                paths
                    .iter()
                    .map(|path| Value::from(path.display().to_string()))
                    .collect(),
            ),
            other => Value::from(other.word()),
        }
    }

    /// Parses a string (see [`FromStr`]) or a list of absolute paths.
    pub fn from_json(value: &Value) -> Result<FilesystemSetting, UnknownSetting> {
        match value {
            Value::String(text) => text.parse(),
            Value::Array(entries) => entries
                .iter()
                .map(|entry| match entry.as_str().map(Path::new) {
                    Some(path) if is_plain_absolute(path) => Ok(path.to_path_buf()),
                    _ => Err(UnknownSetting {
                        detail: Some("a writable path is absolute, without `.` or `..`".to_owned()),
                        ..unknown(
                            "filesystem",
                            entry
                                .as_str()
                                .map_or_else(|| entry.to_string(), str::to_owned),
                        )
                    }),
                })
                .collect::<Result<_, _>>()
                .map(FilesystemSetting::Paths),
            other => Err(unknown("filesystem", other.to_string())),
        }
    }

    pub(crate) fn if_possible(&self) -> bool {
        matches!(
            self,
            FilesystemSetting::ProjectIfPossible | FilesystemSetting::ReadOnlyIfPossible
        )
    }

    /// The writable roots the setting grants besides the TMPDIR (`/` for `full`).
    pub(crate) fn roots(&self, project_dir: &Path) -> Vec<PathBuf> {
        match self {
            FilesystemSetting::Full => vec![PathBuf::from("/")],
            FilesystemSetting::Project | FilesystemSetting::ProjectIfPossible => {
                vec![project_dir.to_path_buf()]
            }
            FilesystemSetting::ReadOnly | FilesystemSetting::ReadOnlyIfPossible => Vec::new(),
            FilesystemSetting::Paths(paths) => paths.clone(),
        }
    }

    /// True when `self` (a project's word) makes nothing writable that `user` (the user's)
    /// does not, in a project at `project_dir`, and is no less enforced.
    pub fn within(&self, user: &FilesystemSetting, project_dir: &Path) -> bool {
        let granted = user.roots(project_dir);
        let covered = self
            .roots(project_dir)
            .iter()
            .all(|need| granted.iter().any(|root| path_covers(root, need)));
        covered && (!self.if_possible() || user.if_possible() || *user == FilesystemSetting::Full)
    }
}

impl FromStr for FilesystemSetting {
    type Err = UnknownSetting;

    fn from_str(text: &str) -> Result<FilesystemSetting, UnknownSetting> {
        [
            FilesystemSetting::Full,
            FilesystemSetting::Project,
            FilesystemSetting::ReadOnly,
            FilesystemSetting::ProjectIfPossible,
            FilesystemSetting::ReadOnlyIfPossible,
        ]
        .into_iter()
        .find(|setting| setting.word() == text)
        .ok_or_else(|| unknown("filesystem", text.to_owned()))
    }
}

impl fmt::Display for FilesystemSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilesystemSetting::Paths(_) => write!(f, "{}", self.to_json()),
            other => f.write_str(other.word()),
        }
    }
}

/// A value that is not one of the documented settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {key} setting `{value}` (expected one of {expected}){}", detail.as_ref().map(|detail| format!(": {detail}")).unwrap_or_default())]
pub struct UnknownSetting {
    /// `network`, `filesystem` or `syscalls`.
    pub key: &'static str,
    /// The value given.
    pub value: String,
    /// The values allowed.
    pub expected: &'static str,
    /// What is wrong with a list entry, when one is.
    pub detail: Option<String>,
}

/// Where the line a denial names goes: `[tools.NAME]`, or `[generator]` for a generated tool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GrantSection<'name>(pub(crate) &'name str);

impl GrantSection<'_> {
    fn line(self, key: &str, entry: &str) -> String {
        format!("{} {key} = [{}]", self.0, toml_string(entry))
    }
}

/// The network of a call: `operator` narrowed by `declared`, or what it does not grant.
pub(crate) fn narrow_network(
    operator: &NetworkSetting,
    declared: Option<&NetworkSetting>,
    section: GrantSection<'_>,
) -> Result<NetworkSetting, Vec<SandboxDenial>> {
    use NetworkSetting as N;
    let Some(declared) = declared else {
        return Ok(match operator {
            N::Declared => N::DenyIfPossible,
            other => other.clone(),
        });
    };
    Ok(match (operator, declared) {
        (_, N::Deny | N::DenyIfPossible) => match operator {
            N::DenyIfPossible | N::Declared | N::AnyPublic => N::DenyIfPossible,
            _ => N::Deny,
        },
        (N::Declared, N::Allow | N::AnyPublic | N::Declared) => N::AnyPublic,
        (operator, N::Allow | N::AnyPublic | N::Declared) => operator.clone(),
        (N::Declared, N::Only(needs)) => {
            // A declaration is not the operator's word: a literal address or network, which
            // the proxy would let through even when private (loopback, the metadata
            // endpoint), and a Unix socket, need the operator's grant.
            let denied: Vec<SandboxDenial> = needs
                .iter()
                .filter(|need| !need.is_host_name())
                .map(|need| {
                    network_denial(
                        need,
                        section,
                        "an address, network or socket is reachable only when the operator names it",
                    )
                })
                .collect();
            if !denied.is_empty() {
                return Err(denied);
            }
            N::Only(needs.clone())
        }
        (N::Allow, N::Only(needs)) => N::Only(needs.clone()),
        (N::AnyPublic, N::Only(needs)) => N::Only(needs.clone()),
        (N::Only(granted), N::Only(needs)) => {
            let denied: Vec<SandboxDenial> = needs
                .iter()
                .filter(|need| !granted.iter().any(|grant| grant.covers(need)))
                .map(|need| network_denial(need, section, "not in the operator's network list"))
                .collect();
            if !denied.is_empty() {
                return Err(denied);
            }
            N::Only(needs.clone())
        }
        (N::Deny | N::DenyIfPossible, N::Only(needs)) => {
            return Err(needs
                .iter()
                .map(|need| network_denial(need, section, "the operator grants no network"))
                .collect());
        }
    })
}

fn network_denial(need: &NetworkTarget, section: GrantSection<'_>, why: &str) -> SandboxDenial {
    let target = need.to_string();
    SandboxDenial {
        kind: DenialKind::Network,
        reason: format!("the tool declares {target}, {why}"),
        grant: section.line("network", &target),
        target,
    }
}

/// The filesystem of a call: `operator` narrowed by `declared`, or what it does not grant.
pub(crate) fn narrow_filesystem(
    operator: &FilesystemSetting,
    declared: Option<&FilesystemSetting>,
    project_dir: &Path,
    section: GrantSection<'_>,
) -> Result<FilesystemSetting, Vec<SandboxDenial>> {
    use FilesystemSetting as F;
    Ok(match (operator, declared) {
        (operator, None | Some(F::Full)) => operator.clone(),
        (_, Some(F::ReadOnly | F::ReadOnlyIfPossible)) if operator.if_possible() => {
            F::ReadOnlyIfPossible
        }
        (_, Some(F::ReadOnly | F::ReadOnlyIfPossible)) => F::ReadOnly,
        (F::Full, Some(level @ (F::Project | F::ProjectIfPossible))) => level.clone(),
        (F::Paths(granted), Some(F::Project | F::ProjectIfPossible)) => {
            F::Paths(intersect_roots(granted, &[project_dir.to_path_buf()]))
        }
        (operator, Some(F::Project | F::ProjectIfPossible)) => operator.clone(),
        (operator, Some(F::Paths(needs))) => {
            let granted = operator.roots(project_dir);
            let denied: Vec<SandboxDenial> = needs
                .iter()
                .filter(|need| !granted.iter().any(|root| path_covers(root, need)))
                .map(|need| {
                    let target = need.display().to_string();
                    SandboxDenial {
                        kind: DenialKind::Write,
                        reason: format!(
                            "the tool declares {target} writable, the operator's filesystem = {operator} does not grant it"
                        ),
                        grant: section.line("filesystem", &target),
                        target,
                    }
                })
                .collect();
            if !denied.is_empty() {
                return Err(denied);
            }
            F::Paths(needs.clone())
        }
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use crate::access::{
        FilesystemSetting, GrantSection, NetworkSetting, narrow_filesystem, narrow_network,
    };

    fn network(value: serde_json::Value) -> NetworkSetting {
        NetworkSetting::from_json(&value).unwrap()
    }

    /// `operator` narrowed by `declared`: the effective setting as JSON, or the grant lines.
    fn check_network(
        operator: NetworkSetting,
        declared: Option<serde_json::Value>,
        expect: serde_json::Value,
    ) {
        let declared = declared.map(network);
        let shown =
            match narrow_network(&operator, declared.as_ref(), GrantSection("[tools.fetch]")) {
                Ok(effective) => json!(effective.to_string()),
                Err(denied) => json!(denied.iter().map(|d| d.grant.clone()).collect::<Vec<_>>()),
            };
        assert_eq!(shown, expect);
    }

    #[test]
    fn network_narrows_to_the_intersection() {
        use NetworkSetting as N;
        check_network(N::Declared, None, json!("deny-if-possible"));
        check_network(N::Declared, Some(json!("any")), json!("any-public"));
        check_network(
            N::Declared,
            Some(json!(["a.test:443"])),
            json!("[\"a.test:443\"]"),
        );
        check_network(N::Allow, None, json!("any"));
        check_network(
            N::Allow,
            Some(json!(["a.test:443"])),
            json!("[\"a.test:443\"]"),
        );
        check_network(N::Allow, Some(json!("none")), json!("none"));
        let list = network(json!(["a.test", "b.test:80"]));
        check_network(
            list.clone(),
            Some(json!("any")),
            json!("[\"a.test\",\"b.test:80\"]"),
        );
        check_network(list.clone(), None, json!("[\"a.test\",\"b.test:80\"]"));
        check_network(
            list.clone(),
            Some(json!(["a.test:443"])),
            json!("[\"a.test:443\"]"),
        );
        check_network(list.clone(), Some(json!("deny")), json!("none"));
        check_network(N::Deny, Some(json!("allow")), json!("none"));
    }

    #[test]
    fn by_default_a_tool_declares_host_names_only() {
        check_network(
            NetworkSetting::Declared,
            Some(json!([
                "a.test",
                "127.0.0.1:8080",
                "169.254.169.254",
                "unix:/run/docker.sock"
            ])),
            json!([
                "[tools.fetch] network = [\"127.0.0.1:8080\"]",
                "[tools.fetch] network = [\"169.254.169.254\"]",
                "[tools.fetch] network = [\"unix:/run/docker.sock\"]"
            ]),
        );
    }

    #[test]
    fn a_declared_destination_not_granted_names_the_line_to_add() {
        use NetworkSetting as N;
        check_network(
            network(json!(["a.test:80"])),
            Some(json!(["a.test:443", "a.test:80"])),
            json!(["[tools.fetch] network = [\"a.test:443\"]"]),
        );
        check_network(
            N::Deny,
            Some(json!(["unix:/run/pg.sock"])),
            json!(["[tools.fetch] network = [\"unix:/run/pg.sock\"]"]),
        );
    }

    #[test]
    fn declared_network_parses_in_every_form() {
        assert_eq!(network(json!("allow")), network(json!("any")));
        assert_eq!(network(json!("deny")), network(json!("none")));
        assert_eq!(network(json!("none")), NetworkSetting::Deny);
        assert_eq!(
            network(json!([
                "api.github.com",
                "*.githubusercontent.com",
                "10.0.0.0/8",
                "[::1]:8080",
                "unix:/run/x.sock"
            ]))
            .to_json(),
            json!([
                "api.github.com",
                "*.githubusercontent.com",
                "10.0.0.0/8",
                "[::1]:8080",
                "unix:/run/x.sock"
            ])
        );
        let refuse =
            |value: serde_json::Value| NetworkSetting::from_json(&value).unwrap_err().to_string();
        assert!(refuse(json!(["http://a.test"])).contains("`http://a.test` is not a destination"));
        assert!(refuse(json!([1])).starts_with("unknown network setting `1`"));
        assert!(refuse(json!({"a": 1})).starts_with("unknown network setting"));
    }

    fn check_filesystem(
        operator: serde_json::Value,
        declared: Option<serde_json::Value>,
        expect: serde_json::Value,
    ) {
        let operator = FilesystemSetting::from_json(&operator).unwrap();
        let declared = declared.map(|value| FilesystemSetting::from_json(&value).unwrap());
        let shown = match narrow_filesystem(
            &operator,
            declared.as_ref(),
            Path::new("/work/p"),
            GrantSection("[tools.gen]"),
        ) {
            Ok(effective) => effective.to_json(),
            Err(denied) => json!(denied.iter().map(|d| d.grant.clone()).collect::<Vec<_>>()),
        };
        assert_eq!(shown, expect);
    }

    #[test]
    fn filesystem_narrows_to_the_intersection() {
        check_filesystem(json!("project"), None, json!("project"));
        check_filesystem(json!("project"), Some(json!("full")), json!("project"));
        check_filesystem(json!("full"), Some(json!("project")), json!("project"));
        check_filesystem(
            json!("project-if-possible"),
            Some(json!("read-only")),
            json!("read-only-if-possible"),
        );
        check_filesystem(
            json!("project"),
            Some(json!(["/work/p/out"])),
            json!(["/work/p/out"]),
        );
        check_filesystem(
            json!("full"),
            Some(json!(["/srv/cache"])),
            json!(["/srv/cache"]),
        );
        check_filesystem(
            json!(["/srv", "/work/p/out"]),
            Some(json!("project")),
            json!(["/work/p/out"]),
        );
        check_filesystem(
            json!(["/srv"]),
            Some(json!(["/srv/cache"])),
            json!(["/srv/cache"]),
        );
    }

    #[test]
    fn a_declared_writable_path_not_granted_names_the_line_to_add() {
        check_filesystem(
            json!("project"),
            Some(json!(["/work/p/out", "/srv/cache"])),
            json!(["[tools.gen] filesystem = [\"/srv/cache\"]"]),
        );
        check_filesystem(
            json!("read-only"),
            Some(json!(["/work/p/out"])),
            json!(["[tools.gen] filesystem = [\"/work/p/out\"]"]),
        );
    }

    #[test]
    fn a_project_may_narrow_a_list_not_widen_it() {
        let user = network(json!(["a.test", "b.test"]));
        assert!(network(json!(["a.test:443"])).within(&user));
        assert!(!network(json!(["c.test"])).within(&user));
        assert!(!NetworkSetting::Allow.within(&user));
        assert!(NetworkSetting::Deny.within(&user));
        let project = Path::new("/work/p");
        let fs = |value: serde_json::Value| FilesystemSetting::from_json(&value).unwrap();
        assert!(fs(json!(["/work/p/out"])).within(&fs(json!("project")), project));
        assert!(!fs(json!(["/etc"])).within(&fs(json!("project")), project));
        assert!(!fs(json!("project")).within(&fs(json!(["/work/p/out"])), project));
        assert!(fs(json!("read-only")).within(&fs(json!(["/work/p/out"])), project));
        assert!(!fs(json!("project-if-possible")).within(&fs(json!("project")), project));
    }
}

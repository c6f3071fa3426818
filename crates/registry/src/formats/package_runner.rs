//! Executables started by a package runner (`#!/usr/bin/env -S uv run --script`, `npx`):
//! the runner fetches the tool's dependencies into the tool's cache before the tool prints a
//! line, which a probe (no network, a 1 s budget) cannot do. Such a tool is prepared once
//! (`toolsmith prepare`, `call/prepare.rs`), and its probes run offline from its cache.
//!
//! Only the first line and a uv script's PEP 723 block (`# /// script` … `# ///`) are read,
//! never run.

/// How many bytes of a file are read to tell its runner and its inline metadata.
pub(crate) const HEAD_BYTES: u64 = 16 * 1024;

/// The package runner that starts a script, from its `#!` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageRunner {
    /// `uv run` (with `--script` or not): a Python script whose dependencies uv resolves
    /// from its PEP 723 block.
    UvScript {
        /// Whether the script has a `# /// script` block: `uv sync --script` installs what
        /// it names without running the script.
        metadata: bool,
        /// Whether that block names at least one dependency (fetched from the index).
        dependencies: bool,
    },
    /// Another runner that fetches a package and runs it (`npx`, `bunx`, `pnpm dlx`,
    /// `uvx`, `pipx run`): prepared by running the tool's probe with the network.
    Fetching {
        /// The runner's command as written, e.g. `npx` or `pnpm dlx`.
        runner: String,
    },
}

impl PackageRunner {
    /// The runner's name in reports.
    pub fn label(&self) -> String {
        match self {
            PackageRunner::UvScript { .. } => "uv run --script".to_owned(),
            PackageRunner::Fetching { runner } => runner.clone(),
        }
    }
}

/// The package runner of the script whose first bytes are `head`, if its `#!` line starts
/// one. `#!/usr/bin/env -S uv run --script` and `#!/usr/local/bin/uv run` are uv scripts;
/// `env`'s own options (`-S`, `-i`, `VAR=value`) are skipped.
pub(crate) fn package_runner(head: &[u8]) -> Option<PackageRunner> {
    let text = String::from_utf8_lossy(head);
    let first = text.lines().next()?.strip_prefix("#!")?;
    let mut words = first.split_whitespace().peekable();
    let mut program = basename(words.next()?);
    if program == "env" {
        while let Some(word) = words.peek() {
            if word.starts_with('-') || word.contains('=') {
                words.next();
            } else {
                break;
            }
        }
        program = basename(words.next()?);
    }
    let rest: Vec<&str> = words.collect();
    let subcommand = rest.iter().find(|word| !word.starts_with('-')).copied();
    match (program, subcommand) {
        ("uv", Some("run")) => {
            let block = script_block(&text);
            Some(PackageRunner::UvScript {
                metadata: block.is_some(),
                dependencies: block.as_deref().is_some_and(names_dependencies),
            })
        }
        ("npx" | "bunx" | "pnpx" | "uvx", _) => Some(PackageRunner::Fetching {
            runner: program.to_owned(),
        }),
        ("pnpm", Some("dlx")) | ("pipx", Some("run")) | ("uv", Some("tool")) => {
            Some(PackageRunner::Fetching {
                runner: format!("{program} {}", subcommand.unwrap_or_default()),
            })
        }
        _ => None,
    }
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The TOML of a PEP 723 `script` block (each line with its `# ` taken off), if the script
/// has one.
fn script_block(text: &str) -> Option<String> {
    let mut lines = text
        .lines()
        .skip_while(|line| line.trim_end() != "# /// script");
    lines.next()?;
    let mut block = String::new();
    for line in lines {
        if line.trim_end() == "# ///" {
            return Some(block);
        }
        let content = line.strip_prefix("# ").or_else(|| line.strip_prefix('#'))?;
        block.push_str(content);
        block.push('\n');
    }
    None
}

/// Whether a block's `dependencies = [...]` names at least one requirement (a quoted string
/// before its closing bracket).
fn names_dependencies(block: &str) -> bool {
    let Some(start) = block.find("dependencies") else {
        return false;
    };
    let after = &block[start + "dependencies".len()..];
    let Some(list) = after.trim_start().strip_prefix('=') else {
        return false;
    };
    let Some(list) = list.trim_start().strip_prefix('[') else {
        return false;
    };
    let inside = list.split(']').next().unwrap_or_default();
    inside.contains('"') || inside.contains('\'')
}

#[cfg(test)]
mod tests {
    use crate::formats::package_runner::{PackageRunner, package_runner};

    fn check(script: &str, expect: Option<PackageRunner>) {
        assert_eq!(package_runner(script.as_bytes()), expect, "{script}");
    }

    fn uv(metadata: bool, dependencies: bool) -> Option<PackageRunner> {
        Some(PackageRunner::UvScript {
            metadata,
            dependencies,
        })
    }

    #[test]
    fn uv_scripts() {
        check(
            "#!/usr/bin/env -S uv run --script\n# /// script\n# dependencies = [\"humanize\"]\n# ///\n",
            uv(true, true),
        );
        check(
            "#!/usr/bin/env -S uv run --script\n# /// script\n# requires-python = \">=3.9\"\n# dependencies = [\n#   \"a\",\n# ]\n# ///\n",
            uv(true, true),
        );
        check(
            "#!/usr/bin/env -S uv run --script\n# /// script\n# dependencies = []\n# ///\n",
            uv(true, false),
        );
        check(
            "#!/usr/bin/env -S uv run --script\nprint(1)\n",
            uv(false, false),
        );
        check("#!/home/me/.local/bin/uv run -q\n", uv(false, false));
        // An unterminated block is no block.
        check(
            "#!/usr/bin/env -S uv run --script\n# /// script\n# dependencies = [\"a\"]\n",
            uv(false, false),
        );
    }

    #[test]
    fn fetching_runners() {
        let fetching = |runner: &str| {
            Some(PackageRunner::Fetching {
                runner: runner.to_owned(),
            })
        };
        check("#!/usr/bin/env -S npx -y cowsay\n", fetching("npx"));
        check("#!/usr/bin/env -S pnpm dlx tool\n", fetching("pnpm dlx"));
        check("#!/usr/bin/env -S uvx ruff\n", fetching("uvx"));
    }

    #[test]
    fn other_scripts() {
        check("#!/usr/bin/env python3\n", None);
        check("#!/bin/bash\n", None);
        check("#!/usr/bin/env -S uv --version\n", None);
        check("\x7fELF", None);
        check("", None);
    }
}

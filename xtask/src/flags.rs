//! The command line of `cargo xtask`: a tiny hand-written parser, so xtask needs no clap.

use crate::bench::BenchSettings;

/// What `cargo xtask --help` and a usage error print.
pub(crate) const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  ci                       fmt --check, clippy -D warnings, test, doc -D warnings, tidy,
                           codegen --check, soak; stops at the first failing step
  soak                     10 000 sequential calls through one `toolsmith serve`: the
                           server's fds, threads, memory and processes must not grow
  tidy                     check house-style rules over every file of the workspace
  codegen [--check]        write the generated files (docs/config.md, from the config
                           file's schema; docs/environment.md, from EnvVars and the
                           executor's variables); --check: fail if one is stale
  bench [--quick] [--calls N] [--only spawn|discovery|filter|generate|egress]
                           per-call cost of an isolated run through the executor,
                           against plain std::process::Command in the same run;
                           N calls per variant with a small parent (default 2000),
                           N/4 with a 1 GiB parent (default 500), with the
                           default / strictest (prepared) ratio;
                           --only spawn: that section alone;
                           then cold and warm discovery of 500 tiny tools against
                           the floor of 500 plain spawns / cores (median of 5);
                           --quick: a few calls and one discovery, for a smoke run;
                           --only discovery: the discovery section alone;
                           then request-to-registered of a generated bash tool
                           into a live registry of 0 and 100 tools, predicted
                           answers and plain path, against its test case alone;
                           --only generate: the generator section alone;
                           then the seccomp allow-list against the deny-list it
                           replaced (install, exec, openat loop);
                           --only filter: the filter section alone;
                           --only egress: the egress proxy section alone
  man [--out DIR]          build toolsmith (dev profile) and write its man pages
                           (toolsmith.1 and one per subcommand) into DIR
                           (default: <target dir>/man)
  install --prefix DIR [--debug]
                           build toolsmith (release; --debug: the dev profile) and
                           install DIR/bin/toolsmith, the system tools in
                           DIR/libexec/toolsmith, man pages in DIR/share/man/man1
                           and bash, zsh and fish completions under DIR/share;
                           the build is the only one: each crate is compiled once
  new-tool NAME --lang python|bash|manifest
                           scaffold an example tool into examples/tools through
                           the generator's templates (refuses to overwrite)
  help                     print this message";

/// One parsed invocation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Task {
    Ci,
    Tidy,
    Codegen { check: bool },
    Soak,
    Bench(BenchSettings),
    NewTool { name: String, language: String },
    Help,
}

/// Parses the arguments after `cargo xtask`. The error is one line for the user.
pub(crate) fn parse(args: impl Iterator<Item = String>) -> Result<Task, String> {
    let mut args = args.peekable();
    let Some(task) = args.next() else {
        return Err("no task given".to_owned());
    };
    let task = match task.as_str() {
        "ci" => Task::Ci,
        "tidy" => Task::Tidy,
        "codegen" => parse_codegen(&mut args)?,
        "soak" => Task::Soak,
        "bench" => Task::Bench(parse_bench(&mut args)?),
        // xtask-launch runs these two itself (xtask/launch): only a direct `cargo run` gets here.
        "man" | "install" => {
            return Err(format!(
                "`{task}` runs through `cargo xtask {task}` (xtask-launch), not this package"
            ));
        }
        "new-tool" => parse_new_tool(&mut args)?,
        "help" | "-h" | "--help" => Task::Help,
        unknown => return Err(format!("unknown task `{unknown}`")),
    };
    match args.next() {
        Some(extra) => Err(format!("unexpected argument `{extra}`")),
        None => Ok(task),
    }
}

fn parse_codegen(args: &mut impl Iterator<Item = String>) -> Result<Task, String> {
    let mut check = false;
    for arg in args.by_ref() {
        match arg.as_str() {
            "--check" => check = true,
            _ => return Err(format!("unknown option `{arg}` for `codegen`")),
        }
    }
    Ok(Task::Codegen { check })
}

fn parse_new_tool(args: &mut impl Iterator<Item = String>) -> Result<Task, String> {
    let name = args
        .next()
        .ok_or_else(|| "`new-tool` needs a NAME".to_owned())?;
    let language = match (args.next().as_deref(), args.next()) {
        (Some("--lang"), Some(language)) => language,
        _ => return Err("`new-tool` needs `--lang python|bash|manifest`".to_owned()),
    };
    Ok(Task::NewTool { name, language })
}

fn parse_bench(args: &mut impl Iterator<Item = String>) -> Result<BenchSettings, String> {
    let mut quick = false;
    let mut calls = None;
    let mut only_discovery = false;
    let mut only_filter = false;
    let mut only_generate = false;
    let mut only_egress = false;
    let mut only_spawn = false;
    let mut only_creations = false;
    while let Some(arg) = args.next() {
        let (flag, inline_value) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        match (flag.as_str(), inline_value) {
            ("--quick", None) => quick = true,
            ("--calls", value) => {
                let Some(value) = value.or_else(|| args.next()) else {
                    return Err("`--calls` needs a number".to_owned());
                };
                let n_calls = value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n_calls| n_calls > 0)
                    .ok_or_else(|| format!("`--calls` needs a positive number, not `{value}`"))?;
                calls = Some(n_calls);
            }
            ("--only", value) => match value.or_else(|| args.next()).as_deref() {
                Some("discovery") => only_discovery = true,
                Some("filter") => only_filter = true,
                Some("generate") => only_generate = true,
                Some("egress") => only_egress = true,
                Some("spawn") => only_spawn = true,
                Some("creations") => only_creations = true,
                Some(section) => {
                    return Err(format!(
                        "`--only` knows the sections `spawn`, `discovery`, `filter`, `generate`, `egress` and `creations`, not `{section}`"
                    ));
                }
                None => {
                    return Err(
                        "`--only` needs a section (`spawn`, `discovery`, `filter`, `generate`, `egress` or `creations`)"
                            .to_owned(),
                    );
                }
            },
            _ => return Err(format!("unknown option `{arg}` for `bench`")),
        }
    }
    let settings = BenchSettings::resolve(quick, calls);
    if only_creations {
        let others = only_spawn || only_discovery || only_filter || only_generate || only_egress;
        return if others {
            Err("`--only` takes one section".to_owned())
        } else {
            Ok(settings.only_creations())
        };
    }
    Ok(
        match (
            only_spawn,
            only_discovery,
            only_filter,
            only_generate,
            only_egress,
        ) {
            (true, false, false, false, false) => settings.only_spawn(),
            (false, true, false, false, false) => settings.only_discovery(),
            (false, false, true, false, false) => settings.only_filter(),
            (false, false, false, true, false) => settings.only_generate(),
            (false, false, false, false, true) => settings.only_egress(),
            (false, false, false, false, false) => settings,
            _ => return Err("`--only` takes one section".to_owned()),
        },
    )
}

#[cfg(test)]
mod tests {
    use crate::bench::BenchSettings;
    use crate::flags::{Task, parse};

    fn check(args: &[&str], expect: Result<Task, &str>) {
        let actual = parse(args.iter().map(|arg| (*arg).to_owned()));
        assert_eq!(actual, expect.map_err(str::to_owned), "args: {args:?}");
    }

    #[test]
    fn help() {
        check(&[], Err("no task given"));
        check(&["help"], Ok(Task::Help));
        check(&["--help"], Ok(Task::Help));
    }

    #[test]
    fn plain_tasks() {
        check(&["ci"], Ok(Task::Ci));
        check(&["tidy"], Ok(Task::Tidy));
        check(&["codegen"], Ok(Task::Codegen { check: false }));
        check(&["codegen", "--check"], Ok(Task::Codegen { check: true }));
        check(
            &["codegen", "--fix"],
            Err("unknown option `--fix` for `codegen`"),
        );
    }

    #[test]
    fn unknown_task_and_extra_arguments() {
        check(&["lint"], Err("unknown task `lint`"));
        check(&["ci", "--fast"], Err("unexpected argument `--fast`"));
    }

    #[test]
    fn bench_options() {
        check(
            &["bench"],
            Ok(Task::Bench(BenchSettings::resolve(false, None))),
        );
        check(
            &["bench", "--quick"],
            Ok(Task::Bench(BenchSettings::resolve(true, None))),
        );
        check(
            &["bench", "--calls", "40"],
            Ok(Task::Bench(BenchSettings::resolve(false, Some(40)))),
        );
        check(
            &["bench", "--calls=40", "--quick"],
            Ok(Task::Bench(BenchSettings::resolve(true, Some(40)))),
        );
        check(
            &["bench", "--only", "discovery"],
            Ok(Task::Bench(
                BenchSettings::resolve(false, None).only_discovery(),
            )),
        );
        check(
            &["bench", "--quick", "--only=discovery"],
            Ok(Task::Bench(
                BenchSettings::resolve(true, None).only_discovery(),
            )),
        );
        check(
            &["bench", "--quick", "--only", "filter"],
            Ok(Task::Bench(
                BenchSettings::resolve(true, None).only_filter(),
            )),
        );
        check(
            &["bench", "--quick", "--only", "generate"],
            Ok(Task::Bench(
                BenchSettings::resolve(true, None).only_generate(),
            )),
        );
        check(
            &["bench", "--quick", "--only=egress"],
            Ok(Task::Bench(
                BenchSettings::resolve(true, None).only_egress(),
            )),
        );
        check(
            &["bench", "--quick", "--only", "spawn"],
            Ok(Task::Bench(BenchSettings::resolve(true, None).only_spawn())),
        );
        check(
            &["bench", "--quick", "--only", "creations"],
            Ok(Task::Bench(
                BenchSettings::resolve(true, None).only_creations(),
            )),
        );
    }

    #[test]
    fn man_and_install_belong_to_the_launcher() {
        check(
            &["install", "--prefix", "p"],
            Err("`install` runs through `cargo xtask install` (xtask-launch), not this package"),
        );
        check(
            &["man"],
            Err("`man` runs through `cargo xtask man` (xtask-launch), not this package"),
        );
    }

    #[test]
    fn bench_bad_options() {
        check(&["bench", "--calls"], Err("`--calls` needs a number"));
        check(
            &["bench", "--calls", "0"],
            Err("`--calls` needs a positive number, not `0`"),
        );
        check(
            &["bench", "--calls=x"],
            Err("`--calls` needs a positive number, not `x`"),
        );
        check(
            &["bench", "--quick=1"],
            Err("unknown option `--quick=1` for `bench`"),
        );
        check(
            &["bench", "--only"],
            Err(
                "`--only` needs a section (`spawn`, `discovery`, `filter`, `generate`, `egress` or `creations`)",
            ),
        );
        check(
            &["bench", "--only", "mcp"],
            Err(
                "`--only` knows the sections `spawn`, `discovery`, `filter`, `generate`, `egress` and `creations`, not `mcp`",
            ),
        );
        check(
            &["bench", "--only", "egress", "--only", "filter"],
            Err("`--only` takes one section"),
        );
        check(
            &["bench", "--slow"],
            Err("unknown option `--slow` for `bench`"),
        );
    }
}

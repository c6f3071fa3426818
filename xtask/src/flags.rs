//! The command line of `cargo xtask`: a tiny hand-written parser, so xtask needs no clap.

use crate::bench::BenchSettings;

/// What `cargo xtask --help` and a usage error print.
pub(crate) const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  ci                       fmt --check, clippy -D warnings, test, doc -D warnings, tidy;
                           stops at the first failing step
  tidy                     check house-style rules over every file of the workspace
  bench [--quick] [--calls N]
                           per-call cost of an isolated run through the executor,
                           against plain std::process::Command in the same run;
                           N calls per variant with a small parent (default 2000),
                           N/4 with a 1 GiB parent (default 500);
                           then cold and warm discovery of 500 tiny tools against
                           the floor of 500 plain spawns / cores (median of 5);
                           --quick: a few calls and one discovery, for a smoke run;
                           then request-to-registered of a generated bash tool
                           against running its one test case alone
  new-tool NAME --lang python|bash|manifest
                           scaffold an example tool into examples/tools through
                           the generator's templates (refuses to overwrite)
  help                     print this message";

/// One parsed invocation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Task {
    Ci,
    Tidy,
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
        "bench" => Task::Bench(parse_bench(&mut args)?),
        "new-tool" => parse_new_tool(&mut args)?,
        "help" | "-h" | "--help" => Task::Help,
        unknown => return Err(format!("unknown task `{unknown}`")),
    };
    match args.next() {
        Some(extra) => Err(format!("unexpected argument `{extra}`")),
        None => Ok(task),
    }
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
            _ => return Err(format!("unknown option `{arg}` for `bench`")),
        }
    }
    Ok(BenchSettings::resolve(quick, calls))
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
            &["bench", "--slow"],
            Err("unknown option `--slow` for `bench`"),
        );
    }
}

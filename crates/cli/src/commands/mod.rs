//! The subcommands, one module each.

pub(crate) mod discover;
pub(crate) mod doctor;
pub(crate) mod export;
pub(crate) mod generate;
pub(crate) mod learn;
pub(crate) mod list;
pub(crate) mod prepare;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod show;
pub(crate) mod test;
pub(crate) mod trust;
pub(crate) mod validate;

use std::sync::Arc;

use toolsmith_executor::Executor;

use crate::output::Paint;
use crate::settings::GlobalSettings;

/// The `hint:` line for a tool name nobody provides: the closest names of the
/// tools that exist (a full discovery, through the cache), or how to list them.
pub(crate) async fn unknown_tool_hint(
    wanted: &str,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> String {
    let toolsmith = toolsmith_registry::Toolsmith::from_parts(
        Arc::clone(executor),
        global.run_config(&global.cwd, None),
        global.policy(None),
    );
    let catalog = discover::discover(global, &toolsmith, &|_| {}).await;
    let names: Vec<&str> = catalog
        .tools()
        .iter()
        .map(|tool| tool.name().as_str())
        .collect();
    let plain = wanted
        .strip_prefix(toolsmith_registry::EXPOSED_PREFIX)
        .unwrap_or(wanted);
    let close = closest(plain, &names);
    let hint = if close.is_empty() {
        "`toolsmith list --all` shows every tool, and the files that failed to load".to_owned()
    } else {
        let quoted: Vec<String> = close.iter().map(|name| format!("`{name}`")).collect();
        format!("did you mean {}?", quoted.join(" or "))
    };
    format!("{} {hint}\n", Paint::Warn.paint("hint:"))
}

/// Up to three of `candidates` close to `wanted`: an edit distance within a
/// third of its length (at least 2), or one containing the other.
pub(crate) fn closest<'a>(wanted: &str, candidates: &[&'a str]) -> Vec<&'a str> {
    let budget = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = candidates
        .iter()
        .filter(|candidate| !candidate.is_empty() && **candidate != wanted)
        .filter_map(|candidate| {
            let distance = strsim::levenshtein(wanted, candidate);
            let contains =
                wanted.len() >= 3 && (candidate.contains(wanted) || wanted.contains(*candidate));
            (distance <= budget || contains).then_some((distance, *candidate))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, name)| name).collect()
}

#[cfg(test)]
mod tests {
    use crate::commands::closest;

    #[test]
    fn closest_names() {
        let names = [
            "hello",
            "git_info",
            "word_count",
            "word_stats",
            "error_tool",
        ];
        assert_eq!(closest("helo", &names), ["hello"]);
        assert_eq!(closest("word", &names), ["word_count", "word_stats"]);
        assert_eq!(closest("gitinfo", &names), ["git_info"]);
        assert!(closest("deploy", &names).is_empty());
    }
}

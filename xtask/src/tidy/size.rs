//! The size rule: a source file holds at most [`MAX_FILE_LINES`] lines of non-test code, and
//! a function at most [`MAX_FN_LINES`] lines unless a `// long: <why>` comment above it says
//! why.
//!
//! Sizes come from a real parse (syn, with proc-macro2's span locations), not from counting
//! braces: a brace in a string, a raw string or a comment must not end a function early.
//! Test code is whatever a `#[cfg(test)]` attribute guards (a `mod tests` block, a test-only
//! function), a file under a `tests/` directory, or a `tests.rs` module; it counts toward
//! neither limit, since a test reads top to bottom and its length is its scenario.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::Visit;

use super::{Finding, Rule};

/// The most lines of non-test code one source file holds.
pub(super) const MAX_FILE_LINES: usize = 800;

/// The most lines one function spans, from its first line to its closing brace.
pub(super) const MAX_FN_LINES: usize = 120;

/// The comment that lets a function be longer, with the reason after it.
const LONG_MARKER: &str = "// long:";

/// Whether `path` (relative, `/`-separated) is test code as a whole.
pub(super) fn is_test_file(path: &str) -> bool {
    path.starts_with("tests/")
        || path.contains("/tests/")
        || path.ends_with("/tests.rs")
        || path == "tests.rs"
}

/// The size findings of one `.rs` file.
pub(super) fn check(path: &str, text: &str, findings: &mut Vec<Finding>) {
    if is_test_file(path) {
        return;
    }
    // A file that does not parse is the compiler's to report (and tidy's own fixtures are
    // fragments).
    let Ok(file) = syn::parse_file(text) else {
        return;
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut walker = Walker {
        lines: &lines,
        test_lines: 0,
        findings,
    };
    walker.visit_file(&file);
    let total = lines.len();
    let code = total.saturating_sub(walker.test_lines);
    if code > MAX_FILE_LINES {
        findings.push(Finding {
            line: 1,
            rule: Rule::Size,
            message: format!(
                "{code} lines of non-test code, more than {MAX_FILE_LINES}: split the file along a seam of what it does"
            ),
        });
    }
}

/// Walks a parsed file: adds up the lines of test items and reports long functions outside them.
struct Walker<'a> {
    lines: &'a [&'a str],
    test_lines: usize,
    findings: &'a mut Vec<Finding>,
}

impl Walker<'_> {
    /// Checks one function: `first` is its first line (its first attribute or doc comment),
    /// `keyword` the line of `fn`, `last` the line of its closing brace (all 1-based).
    fn check_fn(&mut self, name: &syn::Ident, first: usize, keyword: usize, last: usize) {
        let length = last + 1 - keyword;
        if length <= MAX_FN_LINES || self.has_long_marker(first, keyword) {
            return;
        }
        self.findings.push(Finding {
            line: keyword,
            rule: Rule::Size,
            message: format!(
                "fn `{name}` is {length} lines, more than {MAX_FN_LINES}: split it, or say why it must be long in a `{LONG_MARKER} <why>` comment above it"
            ),
        });
    }

    /// Whether a `// long:` comment is among the item's attributes and doc comments, or in the
    /// run of plain comments just above them.
    fn has_long_marker(&self, first: usize, keyword: usize) -> bool {
        let is_marker = |line: &str| line.trim_start().starts_with(LONG_MARKER);
        let within = (first..keyword).any(|line| self.line(line).is_some_and(is_marker));
        let above = (1..first)
            .rev()
            .map_while(|line| {
                self.line(line)
                    .filter(|text| text.trim_start().starts_with("//"))
            })
            .any(is_marker);
        within || above
    }

    /// Line `number` (1-based), if the file has it.
    fn line(&self, number: usize) -> Option<&str> {
        self.lines.get(number.checked_sub(1)?).copied()
    }

    /// Counts an item guarded by `#[cfg(test)]` as test lines; true when it was one.
    fn skip_if_test(&mut self, attrs: &[syn::Attribute], item: Span) -> bool {
        if !attrs.iter().any(is_cfg_test) {
            return false;
        }
        let first = first_line(attrs, item);
        self.test_lines += item.end().line + 1 - first;
        true
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(item) => &item.attrs,
            syn::Item::Enum(item) => &item.attrs,
            syn::Item::Fn(item) => &item.attrs,
            syn::Item::Impl(item) => &item.attrs,
            syn::Item::Mod(item) => &item.attrs,
            syn::Item::Static(item) => &item.attrs,
            syn::Item::Struct(item) => &item.attrs,
            syn::Item::Trait(item) => &item.attrs,
            syn::Item::Use(item) => &item.attrs,
            syn::Item::Macro(item) => &item.attrs,
            _ => &[],
        };
        if self.skip_if_test(attrs, item.span()) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        self.check_fn(
            &function.sig.ident,
            first_line(&function.attrs, function.span()),
            function.sig.fn_token.span.start().line,
            function.block.brace_token.span.close().end().line,
        );
        syn::visit::visit_item_fn(self, function);
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        if self.skip_if_test(&function.attrs, function.span()) {
            return;
        }
        self.check_fn(
            &function.sig.ident,
            first_line(&function.attrs, function.span()),
            function.sig.fn_token.span.start().line,
            function.block.brace_token.span.close().end().line,
        );
        syn::visit::visit_impl_item_fn(self, function);
    }

    fn visit_trait_item_fn(&mut self, function: &'ast syn::TraitItemFn) {
        if let Some(block) = &function.default {
            self.check_fn(
                &function.sig.ident,
                first_line(&function.attrs, function.span()),
                function.sig.fn_token.span.start().line,
                block.brace_token.span.close().end().line,
            );
        }
        syn::visit::visit_trait_item_fn(self, function);
    }
}

/// The first line of an item: its first attribute's (doc comments are attributes), or its own.
fn first_line(attrs: &[syn::Attribute], item: Span) -> usize {
    attrs
        .iter()
        .map(|attr| attr.span().start().line)
        .chain([item.start().line])
        .min()
        .unwrap_or(1)
}

/// `#[cfg(test)]`, or a `cfg` whose condition needs `test` (`all(test, …)`).
fn is_cfg_test(attr: &syn::Attribute) -> bool {
    if !attr.path().is_ident("cfg") {
        return false;
    }
    let Ok(list) = attr.meta.require_list() else {
        return false;
    };
    let condition = list.tokens.to_string();
    condition == "test" || condition.starts_with("all (test") || condition.starts_with("all(test")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(path: &str, text: &str) -> Vec<Finding> {
        let mut findings = Vec::new();
        check(path, text, &mut findings);
        findings
    }

    /// A function of `body_lines` statement lines (plus its `fn` line and closing brace).
    fn function(name: &str, body_lines: usize) -> String {
        let mut text = format!("fn {name}() {{\n");
        for index in 0..body_lines {
            text.push_str(&format!("    let _x{index} = \"}}\";\n"));
        }
        text.push_str("}\n");
        text
    }

    #[test]
    fn a_function_of_120_lines_passes_and_121_fails() {
        assert_eq!(findings("src/a.rs", &function("short", 118)), []);
        let long = findings("src/a.rs", &function("long", 119));
        assert_eq!(long.len(), 1, "{long:?}");
        assert_eq!(long[0].line, 1);
        assert!(
            long[0].message.contains("fn `long` is 121 lines"),
            "{long:?}"
        );
    }

    #[test]
    fn a_long_marker_above_the_function_or_its_attributes_excuses_it() {
        let body = function("long", 200);
        let marked =
            format!("// long: one match over every system call, read top to bottom\n{body}");
        assert_eq!(findings("src/a.rs", &marked), []);
        let with_doc = format!("// long: a table\n/// Does it.\n#[inline]\n{body}");
        assert_eq!(findings("src/a.rs", &with_doc), []);
        let between = format!("/// Does it.\n// long: a table\n#[inline]\n{body}");
        assert_eq!(findings("src/a.rs", &between), []);
        let unrelated = format!("// a plain comment\n\n{body}");
        assert_eq!(findings("src/a.rs", &unrelated).len(), 1);
    }

    #[test]
    fn methods_and_nested_functions_are_measured() {
        let method = format!(
            "struct S;\nimpl S {{\n{}}}\n",
            function("method", 130).replace("fn method", "    fn method")
        );
        let found = findings("src/a.rs", &method);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].line, 3);
        let nested = format!("fn outer() {{\n{}}}\n", function("inner", 130));
        let found = findings("src/a.rs", &nested);
        assert_eq!(
            found.len(),
            2,
            "the outer and the inner function: {found:?}"
        );
    }

    #[test]
    fn test_code_counts_toward_neither_limit() {
        let mut text = String::from("//! A module.\n");
        for index in 0..700 {
            text.push_str(&format!("const C{index}: u8 = 0;\n"));
        }
        text.push_str("#[cfg(test)]\nmod tests {\n");
        text.push_str(&function("a_long_test", 300));
        for index in 0..300 {
            text.push_str(&format!("    const T{index}: u8 = 0;\n"));
        }
        text.push_str("}\n");
        assert_eq!(findings("src/a.rs", &text), []);
        assert_eq!(findings("tests/a.rs", &function("long", 500)), []);
        assert_eq!(findings("src/parse/tests.rs", &function("long", 500)), []);
    }

    #[test]
    fn a_file_over_800_lines_of_code_fails() {
        let mut text = String::new();
        for index in 0..801 {
            text.push_str(&format!("const C{index}: u8 = 0;\n"));
        }
        let found = findings("src/a.rs", &text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].message.starts_with("801 lines of non-test code"),
            "{found:?}"
        );
        text.truncate(text.len() - "const C800: u8 = 0;\n".len());
        assert_eq!(findings("src/a.rs", &text), []);
    }

    #[test]
    fn a_file_that_does_not_parse_is_left_to_the_compiler() {
        assert_eq!(findings("src/a.rs", "fn broken( {\n"), []);
    }
}

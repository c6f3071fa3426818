//! Writing data to stdout (JSON documents, plain text and aligned tables) and deciding when to colour it.
//!
//! Colour follows `--color` (clap's `ColorChoice`): `always`, `never`, or
//! `auto`, which colours a stream only when it is a terminal, `NO_COLOR` is
//! unset or empty, and `TERM` is not `dumb`; `CLICOLOR_FORCE` (non-empty, not
//! `0`) turns `auto` on even on a pipe. The decision is taken once per stream,
//! by [`init_color`], before anything is written.
//!
//! Text is always styled ([`Paint`]); each stream is an `anstream::AutoStream` that passes
//! the styles through when that stream is coloured and strips them otherwise, so no
//! function that formats text needs to know whether it will be coloured.
//!
//! Text may carry what a tool supplied (its name, description, parameters, problems), and a
//! terminal obeys control sequences: OSC 52 sets the clipboard, OSC 0 the window title, cursor
//! movements rewrite earlier lines, bidi overrides reorder what is shown. So every text
//! written by [`write_text`] and [`write_stderr`] goes through [`terminal_safe`], which keeps
//! newlines, tabs and the styles of [`Paint`], and shows every other control character as a
//! visible escape ([`escape_controls`]); a [`Cell`] and a painted text are escaped when made,
//! so a tool's own escape sequence is shown, never obeyed, coloured terminal or not.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

use anstyle::{AnsiColor, Style};
use anyhow::Context;
use unicode_width::UnicodeWidthStr;

use crate::env_vars::EnvVars;

/// Whether stdout and stderr are coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Colors {
    pub(crate) stdout: bool,
    pub(crate) stderr: bool,
}

static COLORS: OnceLock<Colors> = OnceLock::new();

/// Decides, once, whether each stream is coloured.
pub(crate) fn init_color(choice: clap::ColorChoice) -> Colors {
    *COLORS.get_or_init(|| {
        let lookup = |name: &str| std::env::var(name).ok();
        Colors {
            stdout: wants_color(choice, std::io::stdout().is_terminal(), &lookup),
            stderr: wants_color(choice, std::io::stderr().is_terminal(), &lookup),
        }
    })
}

/// The decision for one stream.
pub(crate) fn wants_color(
    choice: clap::ColorChoice,
    terminal: bool,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> bool {
    match choice {
        clap::ColorChoice::Always => true,
        clap::ColorChoice::Never => false,
        clap::ColorChoice::Auto => {
            let set = |name: &str| lookup(name).is_some_and(|value| !value.is_empty());
            if set(EnvVars::NO_COLOR) {
                return false;
            }
            if lookup(EnvVars::CLICOLOR_FORCE)
                .is_some_and(|value| !value.is_empty() && value != "0")
            {
                return true;
            }
            terminal && lookup(EnvVars::TERM).as_deref() != Some("dumb")
        }
    }
}

/// The colours in force ([`init_color`] was not called: none).
pub(crate) fn colors() -> Colors {
    COLORS.get().copied().unwrap_or(Colors {
        stdout: false,
        stderr: false,
    })
}

/// The styles toolsmith uses, so that every command colours alike.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Paint {
    /// Table headers and section titles.
    Header,
    /// A tool's name.
    Name,
    /// Something that works: `yes`, `ok`.
    Good,
    /// Something to look at: `no`, a missing directory, a warning.
    Warn,
    /// Something broken: `error:`, a failed check, a problem.
    Bad,
    /// Secondary text: paths, sources of a setting.
    Dim,
}

impl Paint {
    fn style(self) -> Style {
        match self {
            Paint::Header => Style::new().bold(),
            Paint::Name => Style::new().fg_color(Some(AnsiColor::Cyan.into())),
            Paint::Good => Style::new().fg_color(Some(AnsiColor::Green.into())),
            Paint::Warn => Style::new().fg_color(Some(AnsiColor::Yellow.into())),
            Paint::Bad => Style::new().fg_color(Some(AnsiColor::Red.into())).bold(),
            Paint::Dim => Style::new().dimmed(),
        }
    }

    /// `text` in this style (an empty text stays empty); the stream it is written to drops
    /// the style unless it is coloured.
    pub(crate) fn paint(self, text: &str) -> String {
        if !text.is_empty() {
            let style = self.style();
            let text = escape_controls(text);
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }
}

/// One cell of a [`table`]: its text and an optional style.
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    text: String,
    paint: Option<Paint>,
}

impl Cell {
    pub(crate) fn plain(text: impl Into<String>) -> Cell {
        Cell {
            text: escape_controls(&text.into()).into_owned(),
            paint: None,
        }
    }

    pub(crate) fn painted(text: impl Into<String>, paint: Paint) -> Cell {
        Cell {
            text: escape_controls(&text.into()).into_owned(),
            paint: Some(paint),
        }
    }
}

/// Rows aligned in columns by display width (so `é` or `✓` count as one
/// column and CJK as two), each line prefixed by `indent`, two spaces between
/// columns, no trailing spaces; `headers` (if any) in the header style.
pub(crate) fn table(indent: &str, headers: &[&str], rows: &[Vec<Cell>]) -> String {
    let columns = rows
        .iter()
        .map(Vec::len)
        .chain([headers.len()])
        .max()
        .unwrap_or(0);
    let mut widths = vec![0; columns];
    for (column, header) in headers.iter().enumerate() {
        widths[column] = widths[column].max(header.width());
    }
    for row in rows {
        for (column, cell) in row.iter().enumerate() {
            widths[column] = widths[column].max(cell.text.width());
        }
    }
    let header_row: Vec<Cell> = headers
        .iter()
        .map(|header| Cell::painted(*header, Paint::Header))
        .collect();
    let mut text = String::new();
    let all_rows = (!headers.is_empty())
        .then_some(&header_row)
        .into_iter()
        .chain(rows);
    for row in all_rows {
        let mut line = indent.to_owned();
        let last = row.iter().rposition(|cell| !cell.text.is_empty());
        for (column, cell) in row.iter().enumerate() {
            if last.is_none_or(|last| column > last) {
                break;
            }
            if column > 0 {
                line.push_str("  ");
            }
            match cell.paint {
                Some(paint) => line.push_str(&paint.paint(&cell.text)),
                None => line.push_str(&cell.text),
            }
            if Some(column) != last {
                line.push_str(&" ".repeat(widths[column] - cell.text.width()));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// Whether `character` changes what a terminal shows other than by printing itself: the C0
/// controls and DEL, the C1 controls (U+0080 to U+009F, which some terminals obey as 8-bit
/// CSI and OSC), the bidi embeddings, overrides, isolates and marks, and the Unicode line and
/// paragraph separators.
fn is_terminal_control(character: char) -> bool {
    character.is_control()
        || matches!(
            character,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every terminal control character, newlines and tabs included, shown as a
/// visible escape: `\n`, `\r`, `\t`, `\e` for ESC, `\xHH` for the other C0 controls and DEL,
/// `\u{HHHH}` for the rest. For a one-line field a tool supplied (a name, a description).
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_terminal_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        push_escaped(&mut escaped, character);
    }
    std::borrow::Cow::Owned(escaped)
}

fn push_escaped(escaped: &mut String, character: char) {
    match character {
        '\n' => escaped.push_str("\\n"),
        '\r' => escaped.push_str("\\r"),
        '\t' => escaped.push_str("\\t"),
        '\u{1b}' => escaped.push_str("\\e"),
        '\0'..='\u{1f}' | '\u{7f}' => {
            escaped.push_str(&format!("\\x{:02x}", u32::from(character)));
        }
        character if is_terminal_control(character) => {
            escaped.push_str(&format!("\\u{{{:04x}}}", u32::from(character)));
        }
        character => escaped.push(character),
    }
}

/// The escape sequences toolsmith itself writes: the styles of [`Paint`] and their reset.
fn paint_sequences() -> Vec<String> {
    let paints = [
        Paint::Header,
        Paint::Name,
        Paint::Good,
        Paint::Warn,
        Paint::Bad,
        Paint::Dim,
    ];
    let mut sequences: Vec<String> = paints
        .iter()
        .flat_map(|paint| {
            let style = paint.style();
            [style.to_string(), format!("{style:#}")]
        })
        .filter(|sequence| !sequence.is_empty())
        .collect();
    sequences.sort_by_key(|sequence| std::cmp::Reverse(sequence.len()));
    sequences.dedup();
    sequences
}

/// `text` made safe for a terminal: newlines, tabs and [`Paint`]'s own styles pass, every
/// other control character (an ESC that does not start one of those styles, CR, BEL, C1,
/// bidi controls) is shown as a visible escape. Every text that [`write_text`] and
/// [`write_stderr`] write goes through it, so no renderer can pass on a tool's control
/// sequence, even one that forgot to escape a field.
pub(crate) fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_character =
        |character: char| is_terminal_control(character) && character != '\n' && character != '\t';
    if !text.chars().any(unsafe_character) {
        return std::borrow::Cow::Borrowed(text);
    }
    let sequences = paint_sequences();
    let mut safe = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(character) = rest.chars().next() {
        if character == '\u{1b}'
            && let Some(sequence) = sequences
                .iter()
                .find(|sequence| rest.starts_with(sequence.as_str()))
        {
            safe.push_str(sequence);
            rest = &rest[sequence.len()..];
            continue;
        }
        if unsafe_character(character) {
            push_escaped(&mut safe, character);
        } else {
            safe.push(character);
        }
        rest = &rest[character.len_utf8()..];
    }
    std::borrow::Cow::Owned(safe)
}

/// Writes `value` as pretty JSON and a newline, keeping its field order.
pub(crate) fn write_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)
        .map_err(std::io::Error::from)
        .context("cannot write to stdout")?;
    writeln!(stdout).context("cannot write to stdout")?;
    stdout.flush().context("cannot write to stdout")
}

/// Writes `text` to stdout, its styles dropped unless stdout is coloured.
pub(crate) fn write_text(text: &str) -> anyhow::Result<()> {
    let mut stdout = styled(std::io::stdout().lock(), colors().stdout);
    stdout
        .write_all(terminal_safe(text).as_bytes())
        .context("cannot write to stdout")?;
    stdout.flush().context("cannot write to stdout")
}

/// Writes `text` to stderr, its styles dropped unless stderr is coloured. A message that
/// cannot be written has nowhere else to go, so the failure is ignored.
pub(crate) fn write_stderr(text: &str) {
    let mut stderr = styled(std::io::stderr().lock(), colors().stderr);
    let _ignored = stderr.write_all(terminal_safe(text).as_bytes());
    let _ignored = stderr.flush();
}

/// `raw`, passing styles through when `colored`, stripping them otherwise.
fn styled<S: anstream::stream::RawStream>(raw: S, colored: bool) -> anstream::AutoStream<S> {
    if colored {
        anstream::AutoStream::always_ansi(raw)
    } else {
        anstream::AutoStream::never(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::{Cell, Paint, escape_controls, table, terminal_safe, wants_color};

    /// Issue 22, finding 9: every control a tool may supply is shown, never obeyed.
    #[test]
    fn tool_supplied_controls_are_shown_not_obeyed() {
        let hostile = "a\u{1b}]52;c;aGk=\u{7}b\u{1b}]0;title\u{1b}\\c\rd\u{1b}[2Ae\u{9b}31mf\u{202e}g\u{2066}h\u{7f}i\u{8}j\u{2028}k";
        let expected = "a\\e]52;c;aGk=\\x07b\\e]0;title\\e\\c\\rd\\e[2Ae\\u{009b}31mf\\u{202e}g\\u{2066}h\\x7fi\\x08j\\u{2028}k";
        assert_eq!(escape_controls(hostile), expected);
        assert_eq!(terminal_safe(hostile), expected);
        assert_eq!(escape_controls("line\nnext\ttab"), "line\\nnext\\ttab");
        assert_eq!(terminal_safe("line\nnext\ttab"), "line\nnext\ttab");
        // toolsmith's own styles pass the sink; a painted hostile text keeps only them.
        let painted = Paint::Name.paint(hostile);
        assert_eq!(
            terminal_safe(&painted),
            format!("\u{1b}[36m{expected}\u{1b}[0m")
        );
        assert_eq!(Cell::plain("x\u{1b}[2Jy").text, "x\\e[2Jy");
        // A style that is not toolsmith's is escaped at the sink.
        assert_eq!(terminal_safe("\u{1b}[5mblink"), "\\e[5mblink");
    }

    #[test]
    fn auto_color_follows_terminal_and_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        let auto = clap::ColorChoice::Auto;
        assert!(wants_color(auto, true, &env(&[])));
        assert!(!wants_color(auto, false, &env(&[])));
        assert!(!wants_color(auto, true, &env(&[("NO_COLOR", "1")])));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(wants_color(auto, true, &env(&[("NO_COLOR", "")])));
        assert!(!wants_color(auto, true, &env(&[("TERM", "dumb")])));
        assert!(wants_color(auto, false, &env(&[("CLICOLOR_FORCE", "1")])));
        assert!(!wants_color(auto, false, &env(&[("CLICOLOR_FORCE", "0")])));
        assert!(wants_color(
            clap::ColorChoice::Always,
            false,
            &env(&[("NO_COLOR", "1")])
        ));
        assert!(!wants_color(clap::ColorChoice::Never, true, &env(&[])));
    }

    #[test]
    fn tables_align_by_display_width() {
        let rows = vec![
            vec![Cell::plain("héllo"), Cell::plain("x"), Cell::plain("first")],
            vec![Cell::plain("日本"), Cell::plain("longer"), Cell::plain("")],
        ];
        let text = table("  ", &["NAME", "KIND", "DESCRIPTION"], &rows);
        assert_eq!(
            anstream::adapter::strip_str(&text).to_string(),
            "  NAME   KIND    DESCRIPTION\n  héllo  x       first\n  日本   longer\n"
        );
    }

    #[test]
    fn painted_cells_keep_alignment() {
        let rows = vec![vec![Cell::painted("a", Paint::Name), Cell::plain("b")]];
        assert_eq!(
            table("", &["NAME", "X"], &rows),
            "\u{1b}[1mNAME\u{1b}[0m  \u{1b}[1mX\u{1b}[0m\n\u{1b}[36ma\u{1b}[0m     b\n"
        );
    }
}

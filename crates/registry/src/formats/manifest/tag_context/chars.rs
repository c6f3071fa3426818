//! The scan's reading of one character in each context: code, `${ }` expansions and the
//! characters every context shares (quotes, `$` and backquotes), and the words they build.

use crate::formats::manifest::render::{Item, Quoting, TemplateError, as_written};
use crate::formats::manifest::tag_context::commands::here_document_word;
use crate::formats::manifest::tag_context::{
    ArithCloser, BracePhase, CodeKind, Command, Frame, PendingHereDocument, Scan, is_name_char,
};

impl Scan<'_> {
    /// What `\`, quotes, `$` and backticks do alike in code, arithmetic, subscripts and
    /// double quotes (`in_double`: single quotes are plain there, and `${` inherits it).
    pub(super) fn shared_char(
        &mut self,
        index: usize,
        character: char,
        next: Option<Item>,
        in_double: bool,
    ) -> usize {
        let next_char = match next {
            Some(Item::Char(next_char)) => Some(next_char),
            _ => None,
        };
        match character {
            '\\' => self.backslash(index, next),
            '"' if !in_double => {
                self.stack.push((Frame::Double, self.line));
                index + 1
            }
            '\'' if !in_double => {
                self.stack.push((Frame::Single, self.line));
                index + 1
            }
            '`' => {
                if let Some((
                    Frame::Code {
                        kind: CodeKind::Backtick,
                        ..
                    },
                    _,
                )) = self.stack.last()
                {
                    self.end_command(index);
                    self.stack.pop();
                } else {
                    self.stack.push((
                        Frame::Code {
                            kind: CodeKind::Backtick,
                            depth: 0,
                            command: Command::default(),
                        },
                        self.line,
                    ));
                }
                index + 1
            }
            '$' => match next_char {
                Some('\'') if !in_double => {
                    self.stack.push((Frame::AnsiC, self.line));
                    index + 2
                }
                Some('(') if self.char_at(index + 2) == Some('(') => {
                    self.push_arithmetic(
                        Frame::Arith {
                            closer: ArithCloser::DoubleParen,
                            depth: 0,
                            what: "$(( … ))",
                        },
                        index,
                    );
                    index + 3
                }
                Some('(') => {
                    self.stack.push((
                        Frame::Code {
                            kind: CodeKind::Paren,
                            depth: 0,
                            command: Command::default(),
                        },
                        self.line,
                    ));
                    index + 2
                }
                Some('[') => {
                    self.push_arithmetic(
                        Frame::Arith {
                            closer: ArithCloser::Bracket,
                            depth: 0,
                            what: "$[ … ]",
                        },
                        index,
                    );
                    index + 2
                }
                Some('{') => {
                    self.stack.push((
                        Frame::Brace {
                            in_double,
                            phase: BracePhase::Name,
                            depth: 0,
                        },
                        self.line,
                    ));
                    index + 2
                }
                _ => index + 1,
            },
            _ => index + 1,
        }
    }

    pub(super) fn brace_char(
        &mut self,
        index: usize,
        character: char,
        next: Option<Item>,
        in_double: bool,
        phase: BracePhase,
        depth: usize,
    ) -> usize {
        let set_phase = |stack: &mut Vec<(Frame, usize)>, new_phase: BracePhase| {
            if let Some((Frame::Brace { phase, .. }, _)) = stack.last_mut() {
                *phase = new_phase;
            }
        };
        match (phase, character) {
            (_, '}') if depth == 0 => {
                self.stack.pop();
                index + 1
            }
            (BracePhase::Name, '[') => {
                self.push_arithmetic(Frame::Subscript { depth: 0 }, index);
                index + 1
            }
            (BracePhase::Name, ':') => {
                let word_operator = matches!(next, Some(Item::Char('-' | '=' | '?' | '+')));
                set_phase(
                    &mut self.stack,
                    if word_operator {
                        BracePhase::Word
                    } else {
                        BracePhase::Offset
                    },
                );
                index + 1
            }
            (BracePhase::Name, character)
                if is_name_char(character)
                    || (matches!(character, '#' | '!' | '@' | '*' | '?' | '$' | '-')
                        && matches!(
                            self.char_at(index.wrapping_sub(1)),
                            Some('{' | '#' | '!')
                        )) =>
            {
                index + 1
            }
            (BracePhase::Name, _) => {
                set_phase(&mut self.stack, BracePhase::Word);
                self.brace_char(index, character, next, in_double, BracePhase::Word, depth)
            }
            (_, '{') => {
                self.set_depth(depth + 1);
                index + 1
            }
            (_, '}') => {
                self.set_depth(depth - 1);
                index + 1
            }
            (_, '"') => {
                self.stack.push((Frame::Double, self.line));
                index + 1
            }
            _ => self.shared_char(index, character, next, in_double),
        }
    }

    pub(super) fn code_char(
        &mut self,
        index: usize,
        character: char,
        next: Option<Item>,
        kind: CodeKind,
        depth: usize,
        pending: &mut Vec<PendingHereDocument>,
    ) -> Result<usize, TemplateError> {
        let double_bracket = self.in_double_bracket();
        Ok(match character {
            '\n' if double_bracket => {
                self.end_word(index);
                index + 1
            }
            '\n' => {
                self.end_command(index);
                if pending.is_empty() {
                    index + 1
                } else {
                    self.skip_here_documents(index + 1, pending)?
                }
            }
            ' ' | '\t' => {
                self.end_word(index);
                index + 1
            }
            '#' if self.word_is_empty() => {
                let mut index = index;
                while let Some(item) = self.items.get(index) {
                    match *item {
                        Item::Char('\n') => break,
                        Item::Tag(tag_index) => self.contexts[tag_index] = Quoting::Comment,
                        Item::Char(_) => {}
                    }
                    index += 1;
                }
                index
            }
            '&' | '|' | '<' | '>' | '(' | ')' if double_bracket => {
                self.operator_word(index);
                index + 1
            }
            ';' | '&' | '|' => {
                self.end_command(index);
                index + 1
            }
            '<' | '>' => {
                self.end_word(index);
                let mut after = index + 1;
                if character == '<' && next == Some(Item::Char('<')) {
                    if self.char_at(index + 2) == Some('<') {
                        after = index + 3;
                    } else {
                        let (heredoc, word_end) = here_document_word(self.items, index + 2);
                        pending.push(heredoc);
                        return Ok(word_end);
                    }
                }
                while matches!(self.char_at(after), Some('>' | '&' | '|')) {
                    after += 1;
                }
                if let Some(command) = self.command_mut() {
                    command.next_is_redirect = true;
                }
                after
            }
            '(' if self.at_command_start() && next == Some(Item::Char('(')) => {
                self.push_arithmetic(
                    Frame::Arith {
                        closer: ArithCloser::DoubleParen,
                        depth: 0,
                        what: "(( … ))",
                    },
                    index,
                );
                index + 2
            }
            '(' if self.word_ends_with_equals(index) => {
                self.stack.push((Frame::ArrayLiteral, self.line));
                index + 1
            }
            '(' => {
                self.end_command(index);
                if kind == CodeKind::Paren {
                    self.set_depth(depth + 1);
                }
                index + 1
            }
            ')' if kind == CodeKind::Paren && depth == 0 => {
                self.end_command(index);
                self.stack.pop();
                index + 1
            }
            ')' => {
                self.end_command(index);
                if kind == CodeKind::Paren {
                    self.set_depth(depth - 1);
                }
                index + 1
            }
            '[' if self.word_is_identifier(index) => {
                self.push_arithmetic(Frame::Subscript { depth: 0 }, index);
                index + 1
            }
            _ => {
                self.touch_word(index);
                self.shared_char(index, character, next, false)
            }
        })
    }

    fn current_word(&self) -> Option<usize> {
        match self.stack.last() {
            Some((Frame::Code { command, .. }, _)) => command.word_start,
            _ => None,
        }
    }

    fn word_is_empty(&self) -> bool {
        self.current_word().is_none()
    }

    /// Whether the word so far is a plain name (`a` of `a[i]=1`).
    fn word_is_identifier(&self, index: usize) -> bool {
        let Some(start) = self.current_word() else {
            return false;
        };
        let text: Option<String> = self.items[start..index]
            .iter()
            .map(|item| match item {
                Item::Char(character) => Some(*character),
                Item::Tag(_) => None,
            })
            .collect();
        text.is_some_and(|text| crate::oob::is_identifier(&text))
    }

    fn word_ends_with_equals(&self, index: usize) -> bool {
        self.current_word().is_some() && self.char_at(index.wrapping_sub(1)) == Some('=')
    }

    /// Skips the bodies of the pending here-documents, which start at `index`
    /// (just after a newline); a tag inside one is refused.
    fn skip_here_documents(
        &mut self,
        mut index: usize,
        pending: &mut Vec<PendingHereDocument>,
    ) -> Result<usize, TemplateError> {
        for heredoc in pending.drain(..) {
            loop {
                if index >= self.items.len() {
                    return Ok(index);
                }
                let mut text = String::new();
                let mut tag_in_line = None;
                while let Some(item) = self.items.get(index) {
                    index += 1;
                    match *item {
                        Item::Char('\n') => break,
                        Item::Char(character) => text.push(character),
                        Item::Tag(tag_index) => {
                            tag_in_line.get_or_insert(tag_index);
                        }
                    }
                }
                self.line += 1;
                if let Some(tag_index) = tag_in_line
                    && let Some(tag) = self.tags.get(tag_index)
                {
                    return Err(TemplateError::InHereDocument {
                        tag: as_written(tag.raw),
                        line: tag.line,
                        column: tag.column,
                    });
                }
                let candidate = if heredoc.strip_tabs {
                    text.trim_start_matches('\t')
                } else {
                    &text
                };
                if candidate == heredoc.delimiter {
                    break;
                }
            }
        }
        Ok(index)
    }
}

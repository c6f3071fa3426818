//! [`Combine`]: how two layers of settings merge, the one place precedence is decided.

/// Merges two layers of options; `self` is the higher layer and wins.
pub(crate) trait Combine {
    fn combine(self, lower: Self) -> Self;
}

impl<T> Combine for Option<T> {
    fn combine(self, lower: Option<T>) -> Option<T> {
        self.or(lower)
    }
}

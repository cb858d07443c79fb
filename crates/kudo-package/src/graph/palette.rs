//! The colours of the statuses, for every drawing of a plan: the SVG of `package graph` and the
//! style sheet of `kubectl kudo ui` (which embeds [`css`]), so a status has one colour
//! everywhere. Every pair of text and background colour has a contrast ratio of at least 4.5:1
//! (WCAG 2 AA for normal text; checked by the tests here and in the browser test), and the
//! status is always written out as well: the colour is never the only sign.

use kudo_api::ExecutionStatus;

/// The colours of one status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colors {
    /// The CSS class of the status (`st-complete`, `st-not-active`, …).
    pub class: &'static str,
    /// Text colour (`#rrggbb`).
    pub fg: &'static str,
    /// Background colour (`#rrggbb`).
    pub bg: &'static str,
    /// Border colour of a box in that status.
    pub border: &'static str,
}

/// Every status with its colours; `None` is a plan, phase or step that is not active.
pub const STATUSES: &[(Option<ExecutionStatus>, Colors)] = &[
    (None, c("st-not-active", "#57606a", "#f6f8fa", "#8c959f")),
    (
        Some(ExecutionStatus::NeverRun),
        c("st-never-run", "#57606a", "#f6f8fa", "#8c959f"),
    ),
    (
        Some(ExecutionStatus::Pending),
        c("st-pending", "#24292f", "#eaeef2", "#6e7781"),
    ),
    (
        Some(ExecutionStatus::InProgress),
        c("st-in-progress", "#ffffff", "#0550ae", "#0550ae"),
    ),
    (
        Some(ExecutionStatus::Complete),
        c("st-complete", "#ffffff", "#1a7f37", "#1a7f37"),
    ),
    (
        Some(ExecutionStatus::Error),
        c("st-error", "#ffffff", "#9a6700", "#9a6700"),
    ),
    (
        Some(ExecutionStatus::FatalError),
        c("st-fatal-error", "#ffffff", "#cf222e", "#cf222e"),
    ),
    (
        Some(ExecutionStatus::Cancelled),
        c("st-cancelled", "#ffffff", "#57606a", "#57606a"),
    ),
];

const fn c(class: &'static str, fg: &'static str, bg: &'static str, border: &'static str) -> Colors {
    Colors {
        class,
        fg,
        bg,
        border,
    }
}

/// The colours of `status`.
pub fn colors(status: Option<ExecutionStatus>) -> Colors {
    STATUSES
        .iter()
        .find(|(s, _)| *s == status)
        .map(|(_, c)| *c)
        .unwrap_or(STATUSES[0].1)
}

/// One CSS rule per status class: `.st-complete{color:#ffffff;background:#1a7f37;…}`.
pub fn css() -> String {
    STATUSES
        .iter()
        .map(|(_, c)| {
            format!(
                ".{}{{color:{};background:{};border-color:{}}}\n",
                c.class, c.fg, c.bg, c.border
            )
        })
        .collect()
}

/// WCAG 2's contrast ratio of two `#rrggbb` colours (1 to 21), `None` for another notation.
///
/// ```
/// use kudo_package::graph::palette::contrast;
/// assert_eq!(contrast("#000000", "#ffffff").map(|r| r.round()), Some(21.0));
/// ```
pub fn contrast(a: &str, b: &str) -> Option<f64> {
    let (la, lb) = (luminance(a)?, luminance(b)?);
    let (hi, lo) = if la > lb { (la, lb) } else { (lb, la) };
    Some((hi + 0.05) / (lo + 0.05))
}

/// The relative luminance of `#rrggbb` (WCAG 2).
fn luminance(hex: &str) -> Option<f64> {
    let h = hex.strip_prefix('#').filter(|h| h.len() == 6)?;
    let channel = |i: usize| -> Option<f64> {
        let v = f64::from(u8::from_str_radix(&h[i..i + 2], 16).ok()?) / 255.0;
        Some(if v <= 0.03928 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        })
    };
    Some(0.2126 * channel(0)? + 0.7152 * channel(2)? + 0.0722 * channel(4)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_text_has_a_contrast_of_at_least_4_5() {
        for (status, c) in STATUSES {
            let ratio = contrast(c.fg, c.bg).expect("#rrggbb");
            assert!(ratio >= 4.5, "{status:?} ({}): {ratio:.2}", c.class);
        }
        // A known pair (WebAIM's checker): #767676 on white is 4.54:1.
        let r = contrast("#767676", "#ffffff").unwrap();
        assert!((r - 4.54).abs() < 0.01, "{r}");
    }

    #[test]
    fn every_status_has_its_own_class_and_the_css_names_each() {
        let css = css();
        for (_, c) in STATUSES {
            assert_eq!(STATUSES.iter().filter(|(_, o)| o.class == c.class).count(), 1);
            assert!(css.contains(&format!(".{}{{color:{}", c.class, c.fg)), "{css}");
        }
        assert_eq!(colors(Some(ExecutionStatus::Complete)).class, "st-complete");
        assert_eq!(colors(None).class, "st-not-active");
    }
}

//! The style sheet and script, compiled into the binary (the page loads nothing from outside).

/// The page's script (`assets/app.js`).
pub const APP_JS: &str = include_str!("assets/app.js");

/// The style sheet: `assets/style.css` and the status colours of
/// [`kudo_package::graph::palette`], the colours `package graph` draws with.
pub fn style_css() -> String {
    format!(
        "{}{}",
        include_str!("assets/style.css"),
        kudo_package::graph::palette::css()
    )
}

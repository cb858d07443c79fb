//! Test reports: JUnit XML (what CI systems ingest) and the same data as JSON.

use std::fmt::Write as _;

use serde::Serialize;

/// Report format chosen with `--report` / `reportFormat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// JUnit XML, `<name>.xml`.
    Xml,
    /// JSON, `<name>.json`.
    Json,
}

impl ReportFormat {
    /// Parses `xml` / `json` (case-insensitive).
    pub fn parse(s: &str) -> Option<ReportFormat> {
        match s.to_ascii_lowercase().as_str() {
            "xml" => Some(ReportFormat::Xml),
            "json" => Some(ReportFormat::Json),
            _ => None,
        }
    }

    /// File extension.
    pub fn extension(self) -> &'static str {
        match self {
            ReportFormat::Xml => "xml",
            ReportFormat::Json => "json",
        }
    }
}

/// The outcome of one test case.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CaseReport {
    /// Test case (directory) name.
    pub name: String,
    /// The test directory it came from.
    pub classname: String,
    /// Seconds it took.
    pub time: f64,
    /// The namespace it ran in.
    pub namespace: String,
    /// `None` when it passed; else a one-line reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The full failure text (diffs, command errors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_detail: Option<String>,
}

/// One test directory.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirReport {
    /// The test directory.
    pub name: String,
    /// Its cases.
    pub testcases: Vec<CaseReport>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SuiteReport {
    /// Report name.
    pub name: String,
    /// Seconds the run took.
    pub time: f64,
    /// Per test directory.
    pub testsuites: Vec<DirReport>,
}

impl SuiteReport {
    /// Passed case count.
    pub fn passed(&self) -> usize {
        self.cases().filter(|c| c.failure.is_none()).count()
    }

    /// Failed case count.
    pub fn failed(&self) -> usize {
        self.cases().filter(|c| c.failure.is_some()).count()
    }

    fn cases(&self) -> impl Iterator<Item = &CaseReport> {
        self.testsuites.iter().flat_map(|d| d.testcases.iter())
    }

    /// JUnit XML.
    pub fn to_junit_xml(&self) -> String {
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let total = self.passed() + self.failed();
        let _ = writeln!(
            s,
            "<testsuites name=\"{}\" tests=\"{total}\" failures=\"{}\" time=\"{:.3}\">",
            xml_escape(&self.name),
            self.failed(),
            self.time
        );
        for dir in &self.testsuites {
            let failures = dir.testcases.iter().filter(|c| c.failure.is_some()).count();
            let time: f64 = dir.testcases.iter().map(|c| c.time).sum();
            let _ = writeln!(
                s,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" time=\"{time:.3}\">",
                xml_escape(&dir.name),
                dir.testcases.len()
            );
            for c in &dir.testcases {
                let open = format!(
                    "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                    xml_escape(&c.classname),
                    xml_escape(&c.name),
                    c.time
                );
                match &c.failure {
                    None => {
                        let _ = writeln!(s, "{open}></testcase>");
                    }
                    Some(msg) => {
                        let _ = writeln!(s, "{open}>");
                        let _ = writeln!(
                            s,
                            "      <failure message=\"{}\" type=\"\">{}</failure>",
                            xml_escape(msg),
                            xml_escape(c.failure_detail.as_deref().unwrap_or(msg))
                        );
                        let _ = writeln!(s, "    </testcase>");
                    }
                }
            }
            let _ = writeln!(s, "  </testsuite>");
        }
        s.push_str("</testsuites>\n");
        s
    }

    /// JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Escapes text for XML attributes and content; characters XML 1.0 cannot carry are dropped.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

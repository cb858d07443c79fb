//! Which Kubernetes API errors a task should report as transient (retry on the next pass) and
//! which as fatal (stop the plan).
//!
//! KUDO retried every API error forever, so a patch rejected for an immutable field (a Job
//! template, a StatefulSet's `volumeClaimTemplates`) left the plan in ERROR indefinitely and, because
//! the webhook denies upgrades while a plan runs, blocked the instance (KUDO #1764). Requests the
//! server rejected as invalid cannot succeed by retrying the same request, so we make them fatal:
//! the user must change parameters or the operator, exactly as for other fatal errors.

/// How a failed API call affects the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Retry on the next pass (step ERROR).
    Transient,
    /// Stop the plan (FATAL_ERROR).
    Fatal,
}

/// Classifies an API error by HTTP status code and `Status.reason`.
///
/// * 400 BadRequest, 403 Forbidden, 422 Invalid (and those reasons with any code): fatal.
///   Forbidden is fatal because RBAC does not fix itself within a plan run; note that the API
///   server reports a namespace being terminated as 403 with reason Forbidden as well.
/// * 409 Conflict / AlreadyExists, 429 TooManyRequests, 5xx, timeouts and anything unknown
///   (including code 0 = no response, e.g. connection refused): transient.
/// * 404 NotFound: transient (a dependency may appear later; Delete tasks handle NotFound
///   themselves before calling this).
pub fn classify_api_error(code: u16, reason: &str) -> ErrorClass {
    match reason {
        "BadRequest"
        | "Forbidden"
        | "Invalid"
        | "MethodNotAllowed"
        | "NotAcceptable"
        | "UnsupportedMediaType"
        | "RequestEntityTooLarge" => {
            return ErrorClass::Fatal;
        }
        "Conflict" | "AlreadyExists" | "TooManyRequests" | "Timeout" | "ServerTimeout"
        | "ServiceUnavailable" | "InternalError" | "NotFound" | "Gone" | "Expired" => {
            return ErrorClass::Transient;
        }
        _ => {}
    }
    match code {
        400 | 403 | 405 | 406 | 413 | 415 | 422 => ErrorClass::Fatal,
        _ => ErrorClass::Transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_requests_are_fatal() {
        assert_eq!(classify_api_error(422, "Invalid"), ErrorClass::Fatal);
        assert_eq!(classify_api_error(400, "BadRequest"), ErrorClass::Fatal);
        assert_eq!(classify_api_error(403, "Forbidden"), ErrorClass::Fatal);
        assert_eq!(classify_api_error(422, ""), ErrorClass::Fatal);
        assert_eq!(classify_api_error(400, ""), ErrorClass::Fatal);
        assert_eq!(classify_api_error(403, ""), ErrorClass::Fatal);
        assert_eq!(classify_api_error(415, ""), ErrorClass::Fatal);
    }

    #[test]
    fn retryable_errors_are_transient() {
        assert_eq!(classify_api_error(409, "Conflict"), ErrorClass::Transient);
        assert_eq!(classify_api_error(409, "AlreadyExists"), ErrorClass::Transient);
        assert_eq!(classify_api_error(429, "TooManyRequests"), ErrorClass::Transient);
        assert_eq!(classify_api_error(500, "InternalError"), ErrorClass::Transient);
        assert_eq!(
            classify_api_error(503, "ServiceUnavailable"),
            ErrorClass::Transient
        );
        assert_eq!(classify_api_error(504, "Timeout"), ErrorClass::Transient);
        assert_eq!(classify_api_error(500, "ServerTimeout"), ErrorClass::Transient);
        assert_eq!(classify_api_error(404, "NotFound"), ErrorClass::Transient);
        assert_eq!(classify_api_error(0, ""), ErrorClass::Transient);
        assert_eq!(classify_api_error(418, "Teapot"), ErrorClass::Transient);
    }

    #[test]
    fn reason_wins_over_code() {
        // an aggregated API server answering 500 with reason Invalid is still an invalid request
        assert_eq!(classify_api_error(500, "Invalid"), ErrorClass::Fatal);
        assert_eq!(classify_api_error(400, "Conflict"), ErrorClass::Transient);
    }
}

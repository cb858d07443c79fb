//! Rolling-update arithmetic of the Deployment controller, as pure functions over replica counts.

/// What the rollout knows about one old ReplicaSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OldRs {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.availableReplicas`.
    pub available: i32,
}

/// `(maxSurge, maxUnavailable)` as absolute numbers. Surge rounds up, unavailability rounds
/// down, and if both end up 0 one pod may be unavailable so a rollout can make progress.
pub fn fenceposts(max_surge: i32, max_unavailable: i32) -> (i32, i32) {
    if max_surge == 0 && max_unavailable == 0 {
        (0, 1)
    } else {
        (max_surge, max_unavailable)
    }
}

/// New `spec.replicas` of the new ReplicaSet: grow it as far as the surge budget allows.
/// `all_replicas` is the sum of `spec.replicas` over every ReplicaSet of the Deployment.
pub fn scale_up_new(desired: i32, max_surge: i32, new_replicas: i32, all_replicas: i32) -> i32 {
    if new_replicas > desired {
        return desired;
    }
    if new_replicas == desired {
        return new_replicas;
    }
    let max_total = desired + max_surge;
    if all_replicas >= max_total {
        return new_replicas;
    }
    let up = (max_total - all_replicas).min(desired - new_replicas);
    new_replicas + up.max(0)
}

/// New `spec.replicas` of each old ReplicaSet (in the given order, oldest first), shrinking them
/// only as far as `maxUnavailable` permits: unhealthy (unavailable) replicas go first, then
/// available ones while the Deployment keeps `desired - maxUnavailable` pods available.
pub fn scale_down_old(
    desired: i32,
    max_unavailable: i32,
    new_replicas: i32,
    new_available: i32,
    old: &[OldRs],
) -> Vec<i32> {
    let mut result: Vec<i32> = old.iter().map(|o| o.replicas).collect();
    let old_total: i32 = result.iter().sum();
    if old_total == 0 {
        return result;
    }
    let all_replicas = old_total + new_replicas;
    let min_available = desired - max_unavailable;
    let new_unavailable = (new_replicas - new_available).max(0);
    let mut budget = all_replicas - min_available - new_unavailable;
    if budget <= 0 {
        return result;
    }
    // First remove replicas that are not available anyway: it costs no availability.
    for (i, o) in old.iter().enumerate() {
        if budget <= 0 {
            break;
        }
        let unhealthy = (o.replicas - o.available).max(0);
        let cut = unhealthy.min(budget).min(result[i]);
        result[i] -= cut;
        budget -= cut;
    }
    // Then scale down available replicas while staying above the minimum.
    let old_available: i32 = old.iter().zip(&result).map(|(o, r)| o.available.min(*r)).sum();
    let mut total_down = (old_available + new_available - min_available).min(budget);
    for r in result.iter_mut() {
        if total_down <= 0 {
            break;
        }
        let cut = (*r).min(total_down);
        *r -= cut;
        total_down -= cut;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_zero_allows_one_unavailable() {
        assert_eq!(fenceposts(0, 0), (0, 1));
        assert_eq!(fenceposts(1, 0), (1, 0));
    }

    #[test]
    fn surge_limits_scale_up() {
        // 4 desired, surge 1: 4 old + 0 new -> new may grow to 1.
        assert_eq!(scale_up_new(4, 1, 0, 4), 1);
        // Already at max total.
        assert_eq!(scale_up_new(4, 1, 1, 5), 1);
        // Deployment scaled down below the new RS size.
        assert_eq!(scale_up_new(2, 1, 3, 3), 2);
        // Fresh deployment: no old RS.
        assert_eq!(scale_up_new(3, 1, 0, 0), 3);
    }

    #[test]
    fn scale_down_respects_min_available() {
        // desired 4, maxUnavailable 1 (25%), new RS has 1 replica not yet available, old has 4 available.
        let old = [OldRs {
            replicas: 4,
            available: 4,
        }];
        // all=5, min=3, newUnavailable=1 -> budget 1; available 4+0-3=1 -> old 3.
        assert_eq!(scale_down_old(4, 1, 1, 0, &old), vec![3]);
        // Once the new pod is available the next one can go.
        assert_eq!(
            scale_down_old(
                4,
                1,
                2,
                1,
                &[OldRs {
                    replicas: 3,
                    available: 3
                }]
            ),
            vec![2]
        );
        // maxUnavailable 0 and nothing new available: nothing can go.
        assert_eq!(scale_down_old(4, 0, 1, 0, &old), vec![4]);
    }

    #[test]
    fn unhealthy_old_replicas_go_first() {
        let old = [
            OldRs {
                replicas: 2,
                available: 0,
            },
            OldRs {
                replicas: 2,
                available: 2,
            },
        ];
        // desired 4, maxUnavailable 1, new 0: all=4, min=3, budget=1 -> remove 1 unhealthy from the first.
        assert_eq!(scale_down_old(4, 1, 0, 0, &old), vec![1, 2]);
    }
}

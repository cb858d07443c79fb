-- Health of a KUDO Instance (kudo.dev/v1beta1). The kudo-rs manager writes
-- status.observedGeneration and three conditions: Reconciling (a plan runs; its message says
-- where), Stalled (the plan failed or the change was refused; its message says why) and Ready
-- (KUDO's readiness, observing the generation it judged). KUDO v0.19's own manager writes only
-- Ready, with the reasons PlanInProgress and PlanInFatalError. KUDO has no state in which a
-- plan waits for a manual trigger, so this check never returns Suspended.
-- Uses only the base and table libraries (what Argo CD opens for argocd-cm scripts).
local hs = {}

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Pending deletion: the cleanup plan runs if the operator has one"
  return hs
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the KUDO manager to report status"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the KUDO manager to act on generation " .. generation
  return hs
end

local conditions = {}
for _, c in ipairs(obj.status.conditions) do
  if c.type ~= nil then
    conditions[c.type] = c
  end
end

local function said(c)
  if c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return c.reason or c.type
end

local reconciling = conditions["Reconciling"]
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = said(reconciling)
  return hs
end

local stalled = conditions["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = said(stalled)
  return hs
end

local ready = conditions["Ready"]
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition"
  return hs
end
if ready.reason == "PlanInFatalError" then
  hs.status = "Degraded"
  hs.message = said(ready)
  return hs
end
if ready.status ~= "True" then
  hs.status = "Progressing"
  hs.message = said(ready)
  return hs
end
if generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the plan of generation " .. generation .. " to complete"
  return hs
end
local scheduled = obj.spec ~= nil and obj.spec.planExecution ~= nil and obj.spec.planExecution.planName
if scheduled ~= nil and scheduled ~= "" and observed == nil then
  hs.status = "Progressing"
  hs.message = "Plan " .. scheduled .. " is scheduled"
  return hs
end
hs.status = "Healthy"
hs.message = said(ready)
return hs

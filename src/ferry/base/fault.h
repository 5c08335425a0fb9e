// Named fault points: each step of the exactly-once protocol can be made to kill the process, as a
// crash (kill -9) would, so that the crash suite can prove recovery from every point.
//
// Armed from the environment: FERRY_FAULT=<point>[:<nth hit>] (default: the first hit). The process
// then dies with SIGKILL the nth time execution reaches that point. Unarmed, a point costs one
// relaxed atomic load. Every point is listed in kFaultPoints (fault.cc) with what it means;
// `ferry faults` prints the list and docs/exactly-once.md documents it.
#pragma once

#include <string_view>
#include <vector>

namespace ferry {

struct FaultPointInfo {
  std::string_view name;
  std::string_view description;
};

const std::vector<FaultPointInfo>& AllFaultPoints();

// Reads FERRY_FAULT once. Returns an error message if the variable names an unknown point.
std::string_view ArmFaultsFromEnvironment();

// Dies here if this point is armed and this is its nth hit. `name` must be listed in fault.cc.
void FaultPoint(std::string_view name);

// For the points that inject a failure other than death (a lost connection, ...): true when this
// point is armed and this is its nth hit; the caller then makes the failure happen.
bool FaultInjected(std::string_view name);

}  // namespace ferry

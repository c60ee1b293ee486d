// For upgrade.cpp: a guard on a declaration whose definition is elsewhere; the key names the
// declaration's parameter.
#pragma once

[[dlock::guard("doc:<doc_id>")]] void publish(long doc_id);

// Attack: copy another student's vector_add at compile time. The cohort is laid out as
// cohort/<student>/..., so from alice's dir a relative include reaches bob's file.
#include "../bob/solution.cu"

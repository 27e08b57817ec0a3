/* The peer of bench/launch: a plain PMIx program, what `srun --mpi=pmix`
 * must at least do for any MPI job. Each rank publishes a key, fences with
 * data collection, reads every other rank's key, and finalizes. Rank 0
 * prints
 *   pmix_hello size=N main_ns=T init_ns=T fence_ns=T gets_ns=T finalize_ns=T
 * (CLOCK_REALTIME). The key avoids the "pmix" prefix, which PMIx keeps for
 * its own attributes (a Get of such a key never looks at what ranks put). */
#include <pmix.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t realtime_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static int fail(const char* what, pmix_status_t status) {
  fprintf(stderr, "pmix_hello: %s failed: %s\n", what, PMIx_Error_string(status));
  return 1;
}

int main(void) {
  const int64_t main_ns = realtime_ns();
  pmix_proc_t self;
  PMIX_PROC_CONSTRUCT(&self);
  pmix_status_t status = PMIx_Init(&self, NULL, 0);
  if (status != PMIX_SUCCESS) return fail("PMIx_Init", status);
  const int64_t init_ns = realtime_ns();

  pmix_proc_t wildcard;
  PMIX_LOAD_PROCID(&wildcard, self.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* size_value = NULL;
  status = PMIx_Get(&wildcard, PMIX_JOB_SIZE, NULL, 0, &size_value);
  if (status != PMIX_SUCCESS) return fail("PMIx_Get(PMIX_JOB_SIZE)", status);
  const uint32_t size = size_value->data.uint32;
  PMIX_VALUE_RELEASE(size_value);

  char address[200];
  memset(address, (int)self.rank, sizeof(address));
  pmix_value_t value;
  PMIX_VALUE_CONSTRUCT(&value);
  value.type = PMIX_BYTE_OBJECT;
  value.data.bo.bytes = address;
  value.data.bo.size = sizeof(address);
  status = PMIx_Put(PMIX_GLOBAL, "hello.address", &value);
  if (status != PMIX_SUCCESS) return fail("PMIx_Put", status);
  status = PMIx_Commit();
  if (status != PMIX_SUCCESS) return fail("PMIx_Commit", status);
  pmix_info_t collect;
  PMIX_INFO_CONSTRUCT(&collect);
  bool yes = true;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  status = PMIx_Fence(&wildcard, 1, &collect, 1);
  PMIX_INFO_DESTRUCT(&collect);
  if (status != PMIX_SUCCESS) return fail("PMIx_Fence", status);
  const int64_t fence_ns = realtime_ns();

  for (uint32_t rank = 0; rank < size; ++rank) {
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, self.nspace, rank);
    pmix_value_t* got = NULL;
    status = PMIx_Get(&peer, "hello.address", NULL, 0, &got);
    if (status != PMIX_SUCCESS) {
      fprintf(stderr, "pmix_hello: rank %u reading rank %u: ", self.rank, rank);
      return fail("PMIx_Get of a peer's key", status);
    }
    const int right = got->type == PMIX_BYTE_OBJECT && got->data.bo.size == sizeof(address) &&
                      (unsigned char)got->data.bo.bytes[0] == (unsigned char)rank;
    PMIX_VALUE_RELEASE(got);
    if (!right) {
      fprintf(stderr, "pmix_hello: rank %u's key is wrong\n", rank);
      return 1;
    }
  }
  const int64_t gets_ns = realtime_ns();
  const uint32_t my_rank = self.rank;
  status = PMIx_Finalize(NULL, 0);
  if (status != PMIX_SUCCESS) return fail("PMIx_Finalize", status);
  if (my_rank == 0) {
    printf(
        "pmix_hello size=%u main_ns=%lld init_ns=%lld fence_ns=%lld gets_ns=%lld "
        "finalize_ns=%lld\n",
        size, (long long)main_ns, (long long)init_ns, (long long)fence_ns, (long long)gets_ns,
        (long long)realtime_ns());
  }
  return 0;
}

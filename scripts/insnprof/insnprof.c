/* insnprof: a QEMU TCG plugin that counts the guest instructions executed
 * per translation block, for `scripts/insnprof/profile.sh` (where do a
 * traced call's instructions go, by kernel function).
 *
 * Build: gcc -O2 -shared -fPIC -o insnprof.so insnprof.c
 * Use:   qemu-system-... -plugin ./insnprof.so,out=FILE ...
 * FILE gets one line per block that ran: "vaddr insns_per_run runs".
 *
 * Written against QEMU's plugin API version 1 (QEMU 7.2, Debian 12); the
 * few declarations it needs are repeated below so that no QEMU headers
 * are needed. The inline add is not atomic: use it with single-threaded
 * TCG (ftprobe vm --accel icount). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
typedef void (*tb_trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*udata_cb)(qemu_plugin_id_t id, void *userdata);
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb cb, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

struct block {
	uint64_t vaddr;
	uint64_t n;
	uint64_t runs;
};

/* Blocks live in fixed chunks that are never moved: the translated code
 * holds a pointer to each block's counter. */
#define CHUNK 65536
static struct block **chunks;
static size_t nchunks, used; /* used: blocks in the last chunk */
static char *out_path;

static struct block *new_block(void)
{
	if (!nchunks || used == CHUNK) {
		chunks = realloc(chunks, (nchunks + 1) * sizeof(*chunks));
		chunks[nchunks++] = calloc(CHUNK, sizeof(struct block));
		used = 0;
	}
	return &chunks[nchunks - 1][used++];
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b = new_block();
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->n = qemu_plugin_tb_n_insns(tb);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->runs, 1);
}

static void finished(qemu_plugin_id_t id, void *p)
{
	FILE *f = fopen(out_path, "w");
	if (!f) {
		perror(out_path);
		return;
	}
	for (size_t c = 0; c < nchunks; c++) {
		size_t n = c == nchunks - 1 ? used : CHUNK;
		for (size_t i = 0; i < n; i++) {
			struct block *b = &chunks[c][i];
			if (b->runs)
				fprintf(f, "%llx %llu %llu\n", (unsigned long long)b->vaddr,
					(unsigned long long)b->n, (unsigned long long)b->runs);
		}
	}
	fclose(f);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
							       int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "out=", 4) == 0)
			out_path = strdup(argv[i] + 4);
	}
	if (!out_path) {
		fprintf(stderr, "insnprof: out=FILE is required\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, finished, NULL);
	return 0;
}

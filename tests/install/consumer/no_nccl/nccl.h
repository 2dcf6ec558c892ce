// Found before NCCL's own header by cuda_consumer: a public Echo header that includes <nccl.h>
// fails the build here.
#error "an installed Echo header includes <nccl.h>"

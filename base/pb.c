/* See pb.h. */
#include "base/pb.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>

grpc_byte_buffer *pb_pack(const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    grpc_slice sl = grpc_slice_malloc(len);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(sl));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    return bb;
}

ProtobufCMessage *pb_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader rd;
    if (!bb || !grpc_byte_buffer_reader_init(&rd, bb))
        return NULL;
    grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(all),
                                                    GRPC_SLICE_START_PTR(all));
    grpc_slice_unref(all);
    return m;
}

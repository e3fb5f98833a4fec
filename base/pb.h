/* protobuf-c messages in gRPC core byte buffers, for every gRPC speaker
 * here (cluster/etcd, kubelet/, the test plugin and tools). */
#ifndef CSIFS_PB_H
#define CSIFS_PB_H

#include <grpc/byte_buffer.h>
#include <protobuf-c/protobuf-c.h>

/* msg packed into a new byte buffer (the caller destroys it); NULL when out
 * of memory. */
grpc_byte_buffer *pb_pack(const ProtobufCMessage *msg);
/* A message of descriptor d from bb (NULL bb: none); NULL when unreadable
 * or undecodable. Free it with protobuf_c_message_free_unpacked. */
ProtobufCMessage *pb_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb);

#endif

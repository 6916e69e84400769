// GroupRecords prints every group coordinator record of __consumer_offsets
// with Kafka's own CoordinatorRecordMessageFormatter, serde and JSON
// converters, as kafka-tools' GroupMetadataMessageFormatter does for the
// classic GroupMetadata records only: here the KIP-848 consumer group
// records too (group epoch, member metadata, target and current
// assignments), the share group records and the streams group records
// (KIP-1071: StreamsGroupMetadata, StreamsGroupMemberMetadata,
// StreamsGroupTargetAssignment*, StreamsGroupCurrentMemberAssignment,
// StreamsGroupTopology; record types 17 and 19-23). Run by
// internal/realgen in Java's source-file mode:
//
//   java -cp '<kafka lib>/*' GroupRecords.java <bootstrap servers>
import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters;
import org.apache.kafka.tools.consumer.CoordinatorRecordMessageFormatter;

public class GroupRecords {
    public static class Formatter extends CoordinatorRecordMessageFormatter {
        public Formatter() {
            super(new GroupCoordinatorRecordSerde());
        }

        @Override
        protected boolean isRecordTypeAllowed(short type) {
            return true;
        }

        @Override
        protected JsonNode keyAsJson(ApiMessage m) {
            return CoordinatorRecordJsonConverters.writeRecordKeyAsJson(m);
        }

        @Override
        protected JsonNode valueAsJson(ApiMessage m, short version) {
            return CoordinatorRecordJsonConverters.writeRecordValueAsJson(m, version);
        }
    }

    /**
     * main reads all of __consumer_offsets (args: bootstrap servers), from
     * the beginning to the end offsets it finds first, and prints each
     * record through Formatter, one a line.
     */
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("client.id", "rk-truth");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        Formatter f = new Formatter();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor("__consumer_offsets", Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(pi.topic(), pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.currentTimeMillis() + 60_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("__consumer_offsets not read to its end in 60 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    f.writeTo(r, System.out);
                    System.out.println();
                }
            }
        }
        System.out.flush();
    }
}

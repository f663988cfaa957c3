import { Inject, Injectable } from "@nestjs/common";
import type { EntityManager } from "typeorm";
import type { BatchItem, BatchRejection } from "../../src/index.js";
import { InboxHandler } from "../../src/nestjs/index.js";
import { LEDGER_HANDLER, type LedgerEvent, parseLedgerEvent } from "../ledger/events.js";
import { ledgerHandler } from "../ledger/ledger-handler.js";
import { typeormLedgerSql } from "./typeorm-ledger-sql.js";

/** Where balance.changed goes: `<LEDGER_QUEUE>.balance-changed`. */
export const BALANCE_CHANGED_EXCHANGE = Symbol("balance-changed exchange");

/**
 * The ledger's consumer: the events `npm start` validates, applied by the same business logic
 * (examples/ledger/ledger-handler.ts) on TypeORM. The queue, its partitions and the batch size
 * come from the environment through the module's `handlers.ledger`.
 */
@Injectable()
export class LedgerEvents {
  private readonly ledger;

  constructor(@Inject(BALANCE_CHANGED_EXCHANGE) balanceChangedExchange: string) {
    this.ledger = ledgerHandler(typeormLedgerSql, { balanceChangedExchange });
  }

  @InboxHandler<LedgerEvent>({ handler: LEDGER_HANDLER, parse: parseLedgerEvent, batch: true })
  async apply(items: ReadonlyArray<BatchItem<LedgerEvent, EntityManager>>, tx: EntityManager): Promise<readonly BatchRejection[] | void> {
    return this.ledger.handleBatch!(items, tx);
  }
}
